#!/usr/bin/env python3
"""Writes evals/tool-search/catalogue.json: the fixture tools of the tool-search eval.

Each tool is realistic and distinct (a name, what it does, when to use it, when not to and which
sibling to use instead, what it returns, a closed input schema), so that a model choosing among
them faces what it would face in a large catalogue. Their handlers only acknowledge the call:
the selection eval checks which tool the model chose first, never what the tool did.
Run it again after editing the table; the output is deterministic.
"""
import json
import pathlib

# name | does | use when | returns | params ("name:type:description", "?" after the type: optional)
# types: string, integer, number, boolean, date, datetime, enum(a/b/c), strings (array of strings)
TOOLS = """
calendar_create_event | Creates an event in the user's calendar at a date and time | the user wants a meeting, appointment or event scheduled | the new event's id and its start and end | title:string:What the event is, e.g. "Design review"; start:datetime:When it starts, e.g. 2026-03-04T10:00:00Z; minutes:integer?:How long, in minutes, default 30; attendees:strings?:Email addresses to invite
weather_forecast | Gives the weather forecast (rain, temperature, wind) for a city for the next 7 days | the user asks what the weather will be, later today or on a coming day | one entry per day with rain chance, high and low temperature and wind | city:string:The city, e.g. "Lyon"; days:integer?:How many days ahead, 1 to 7, default 3
contacts_find | Finds people in the user's address book by name, company or email | the user needs someone's phone number, email address or company | matching contacts with name, phone, email and company | name:string:A name or part of one, e.g. "Ben"
currency_convert | Converts an amount of money from one currency to another at today's rate | the user asks how much an amount is worth in another currency | the converted amount, the rate used and its time | amount:number:The amount, e.g. 250; from:string:ISO currency code, e.g. "USD"; to:string:ISO currency code, e.g. "EUR"
calendar_list_events | Lists the events in the user's calendar between two dates | the user asks what is on their calendar, or when they are free | events with id, title, start, end and attendees | from:date:First day, e.g. 2026-03-02; to:date:Last day, e.g. 2026-03-08
calendar_update_event | Moves or renames an existing calendar event | the user wants an event that already exists rescheduled, renamed or lengthened | the event as it is now | event_id:string:The event's id from calendar_list_events; start:datetime?:The new start; title:string?:The new title
calendar_delete_event | Cancels and deletes an event from the user's calendar | the user wants an existing event cancelled | the id of the deleted event | event_id:string:The event's id from calendar_list_events; notify:boolean?:Tell the attendees, default true
calendar_find_free_slot | Finds times when every given person is free for a meeting of a given length | the user wants to know when several people can meet | up to 5 free slots with start and end | attendees:strings:Email addresses; minutes:integer:Length of the meeting in minutes; within_days:integer?:How far ahead to look, default 7
calendar_rsvp | Accepts, declines or tentatively accepts a calendar invitation | the user answers an invitation someone else sent | the invitation's new status | event_id:string:The invitation's event id; answer:enum(accept/decline/tentative):The answer
calendar_share | Shares the user's calendar with another person, read-only or with edit rights | the user wants someone else to see or edit their calendar | who has access now | email:string:The person's email; access:enum(read/edit):What they may do
calendar_set_out_of_office | Marks the user as out of office between two dates and declines new invitations | the user will be away and wants their calendar to say so | the out-of-office period | from:date:First day away; to:date:Last day away; message:string?:Reply sent to invitations
contacts_create | Adds a new person to the user's address book | the user wants to save someone's details that are not in the address book yet | the new contact's id | name:string:Full name; email:string?:Email address; phone:string?:Phone number, e.g. "+33 6 12 34 56 78"
contacts_update | Changes the phone, email or company of a contact already in the address book | the user gives new details for someone already saved | the contact as it is now | contact_id:string:The contact's id from contacts_find; email:string?:New email; phone:string?:New phone
contacts_delete | Removes a person from the user's address book | the user wants a contact deleted | the id of the removed contact | contact_id:string:The contact's id from contacts_find
contacts_merge_duplicates | Merges two contacts that are the same person into one | the address book has the same person twice | the merged contact | keep_id:string:The contact to keep; merge_id:string:The duplicate to fold into it
contacts_birthdays | Lists the birthdays of the user's contacts in the coming weeks | the user asks whose birthday is coming up | names and birthdays, soonest first | weeks:integer?:How many weeks ahead, default 4
weather_current | Gives the weather right now in a city: temperature, sky and wind | the user asks what the weather is like at this moment | the current temperature, conditions and wind | city:string:The city, e.g. "Oslo"
weather_alerts | Lists official severe-weather warnings (storms, floods, heat) for a region | the user asks whether there are weather warnings | active warnings with severity and period | region:string:A city or region, e.g. "Brittany"
weather_history | Gives the weather recorded in a city on a past date | the user asks what the weather was on a day in the past | that day's temperatures, rain and wind | city:string:The city; date:date:The past day, e.g. 2025-07-14
weather_sunrise_sunset | Gives sunrise and sunset times for a place and date | the user asks when the sun rises or sets, or how long the day is | sunrise, sunset and day length | place:string:A city; date:date?:Default today
weather_air_quality | Gives the air-quality index and pollen levels for a city | the user asks about pollution, smog or pollen | the air-quality index, main pollutant and pollen levels | city:string:The city
currency_rates_history | Gives the exchange rate between two currencies over past days | the user asks how a rate has changed over time | one rate per day | from:string:ISO code, e.g. "GBP"; to:string:ISO code; days:integer?:How many past days, default 30
currency_list | Lists the currencies the converter knows, with their ISO codes | the user asks which currencies are supported or what a code means | codes and names | -
crypto_price | Gives the current price of a cryptocurrency in a currency | the user asks what a cryptocurrency such as bitcoin is worth | the price and its change over 24 hours | coin:string:The coin, e.g. "BTC"; currency:string?:ISO code, default "USD"
maps_directions | Gives directions between two places by car, on foot, by bike or by public transport | the user asks how to get somewhere | the route's steps, distance and duration | origin:string:Where from; destination:string:Where to; mode:enum(driving/walking/cycling/transit)?:How, default driving
maps_search_places | Finds places (restaurants, shops, pharmacies) near a location | the user looks for a kind of place nearby | places with name, address, rating and opening hours | query:string:What to find, e.g. "pharmacy"; near:string:An address or city
maps_geocode | Turns an address into latitude and longitude | the user or another step needs the coordinates of an address | latitude, longitude and the normalized address | address:string:The address
maps_travel_time | Estimates how long a trip takes at a given departure time, with traffic | the user asks how long it takes to get somewhere at a certain time | the duration and distance | origin:string:Where from; destination:string:Where to; depart_at:datetime?:When, default now
maps_timezone_of_place | Gives the time zone of a place | the user asks which time zone a city is in | the IANA time zone and its current UTC offset | place:string:A city or address
flights_search | Searches flights between two airports on a date, with prices | the user wants to find or compare flights | flights with airline, times, stops and price | from:string:Airport code, e.g. "CDG"; to:string:Airport code; date:date:Departure day; passengers:integer?:Default 1
flights_book | Books a flight found by flights_search for the user | the user has chosen a flight and wants it booked | the booking reference | offer_id:string:The flight offer's id from flights_search; passenger_name:string:As on the passport
flights_status | Gives the live status of a flight: on time, delayed, gate | the user asks whether a flight is on time or where it boards | status, delay, terminal and gate | flight_number:string:E.g. "AF1234"; date:date?:Default today
flights_cancel_booking | Cancels a flight booking and asks for a refund where the fare allows | the user wants a booked flight cancelled | the cancellation and the refund amount | booking_ref:string:The booking reference
flights_check_in | Checks the user in for a booked flight and returns the boarding pass | the user wants to check in online | the boarding pass and seat | booking_ref:string:The booking reference; seat:string?:A preferred seat, e.g. "12A"
flights_price_alert | Watches a route and tells the user when the fare drops below a price | the user wants to be told when a flight gets cheaper | the alert's id | from:string:Airport code; to:string:Airport code; below:number:The price to watch for
hotels_search | Searches hotels in a city for given dates, with prices and ratings | the user wants somewhere to stay | hotels with price per night, rating and address | city:string:The city; check_in:date:Arrival day; nights:integer:How many nights; guests:integer?:Default 2
hotels_book | Books a room at a hotel found by hotels_search | the user has chosen a hotel and wants it booked | the reservation number | offer_id:string:The room offer's id from hotels_search; guest_name:string:Name on the booking
hotels_cancel | Cancels a hotel reservation | the user wants a hotel booking cancelled | the cancellation and any fee | reservation:string:The reservation number
hotels_reviews | Gives guest reviews of a hotel | the user asks what people say about a hotel | recent reviews with scores | hotel_id:string:The hotel's id from hotels_search; limit:integer?:Default 5
car_rental_search | Searches rental cars at a location for given dates | the user needs to rent a car | cars with model, price and pick-up place | location:string:City or airport code; from:date:Pick-up day; to:date:Return day
files_search | Searches the user's cloud drive for files by name or content | the user looks for a document, spreadsheet or file they saved | files with id, name, folder and modification date | query:string:Words in the name or content; type:enum(any/document/spreadsheet/pdf/image)?:Default any
files_upload | Uploads text as a new file to the user's cloud drive | the user wants something saved as a file in their drive | the new file's id and link | name:string:The file name, e.g. "plan.txt"; content:string:The text; folder:string?:Default the root
files_share | Shares a file in the drive with someone by email | the user wants another person to open or edit a file | the share link and access | file_id:string:The file's id from files_search; email:string:Who; access:enum(view/comment/edit):What they may do
files_delete | Moves a file in the drive to the trash | the user wants a file removed | the id of the trashed file | file_id:string:The file's id from files_search
files_move | Moves a file to another folder of the drive | the user wants a file filed somewhere else | the file's new path | file_id:string:The file's id; folder:string:The target folder
files_read | Reads the text of a file in the drive | the user wants to know what a document says | the file's text, first 8,000 characters | file_id:string:The file's id from files_search
files_create_folder | Creates a folder in the drive | the user wants a new folder | the folder's id | name:string:The folder name; parent:string?:Default the root
files_storage_usage | Tells how much of the drive's storage is used and by what | the user asks whether their drive is full | used and free space, biggest folders | -
tasks_create | Adds a task to the user's to-do app, with an optional due date | the user wants a task in their to-do app (not a note) | the task's id | title:string:The task; due:date?:Due day; list:string?:Default "Inbox"
tasks_list | Lists the open tasks of the user's to-do app | the user asks what they still have to do in their to-do app | tasks with id, title and due date | list:string?:Default all lists; due_before:date?:Only tasks due before this day
tasks_complete | Marks a task of the to-do app as done | the user says they finished a task | the completed task | task_id:string:The task's id from tasks_list
tasks_delete | Deletes a task from the to-do app | the user wants a task removed | the id of the deleted task | task_id:string:The task's id from tasks_list
tasks_assign | Assigns a task in a shared list to someone | the user wants a teammate to do a task | the task with its assignee | task_id:string:The task's id; assignee:string:The person's email
tasks_set_priority | Sets a task's priority | the user says a task is urgent or can wait | the task with its priority | task_id:string:The task's id; priority:enum(low/normal/high):The priority
chat_send_message | Posts a message in a team chat channel | the user wants to tell a channel something | the message's id and link | channel:string:E.g. "#design"; text:string:The message
chat_direct_message | Sends a private chat message to one person | the user wants to message a colleague directly | the message's id | user:string:The person's chat handle or email; text:string:The message
chat_search_messages | Searches the team chat's history | the user looks for something said in the chat | matching messages with channel, author and time | query:string:Words to find; channel:string?:Only this channel
chat_create_channel | Creates a chat channel and invites people | the user wants a new channel | the channel's name and link | name:string:E.g. "launch-2026"; members:strings?:Emails to invite
chat_set_status | Sets the user's chat status text and emoji | the user wants their status to say they are away or busy | the status now shown | text:string:E.g. "In a workshop"; minutes:integer?:Clear after this many minutes
chat_list_unread | Lists the chat messages the user has not read | the user asks what they missed in the chat | unread messages by channel | -
chat_react | Adds an emoji reaction to a chat message | the user wants to react to a message | the reaction | message_id:string:The message's id; emoji:string:E.g. "thumbsup"
github_create_issue | Opens an issue in a GitHub repository | the user wants a bug or feature request filed on GitHub | the issue's number and URL | repo:string:owner/name; title:string:The issue title; body:string?:Details
github_list_pull_requests | Lists the open pull requests of a GitHub repository | the user asks which pull requests are waiting | pull requests with number, title, author and checks | repo:string:owner/name
github_merge_pull_request | Merges a pull request on GitHub | the user wants an approved pull request merged | the merge commit | repo:string:owner/name; number:integer:The pull request number
github_comment | Comments on a GitHub issue or pull request | the user wants to reply on an issue or pull request | the comment's URL | repo:string:owner/name; number:integer:Issue or pull request number; body:string:The comment
github_search_code | Searches code across GitHub repositories | the user looks for where something is defined or used in code | matching files with repository, path and line | query:string:What to find; repo:string?:Only this owner/name
github_close_issue | Closes a GitHub issue | the user says an issue is done or not planned | the issue's state | repo:string:owner/name; number:integer:The issue number; reason:enum(completed/not_planned)?:Default completed
github_create_release | Publishes a release of a GitHub repository from a tag | the user wants a new version released | the release URL | repo:string:owner/name; tag:string:E.g. "v1.4.0"; notes:string?:Release notes
github_workflow_runs | Lists the recent CI workflow runs of a repository and whether they passed | the user asks whether the build is green | runs with workflow, branch, status and time | repo:string:owner/name; branch:string?:Default the main branch
crm_find_customer | Finds customer accounts in the CRM by name or email | the user asks about a customer or client account | accounts with owner, stage and last contact | query:string:Name, company or email
crm_log_call | Logs a call with a customer in the CRM | the user had a call with a client and wants it recorded | the activity's id | account_id:string:The account's id from crm_find_customer; summary:string:What was said
crm_create_deal | Opens a sales deal for a customer in the CRM | the user has a new sales opportunity | the deal's id | account_id:string:The account's id; amount:number:Expected value; close_date:date?:Expected close
crm_update_deal_stage | Moves a CRM deal to another stage of the pipeline | the user says a deal progressed, was won or lost | the deal with its stage | deal_id:string:The deal's id; stage:enum(lead/qualified/proposal/won/lost):The new stage
crm_pipeline_report | Sums the CRM pipeline by stage and owner | the user asks how the sales pipeline looks | totals per stage and per owner | owner:string?:Only this salesperson
crm_assign_owner | Assigns a customer account to a salesperson | the user wants someone else to own an account | the account with its owner | account_id:string:The account's id; owner:string:The salesperson's email
crm_add_contact_to_account | Adds a person to a customer account in the CRM | the user met a new person at a client | the account's contacts | account_id:string:The account's id; name:string:The person; email:string?:Their email
shop_search_products | Searches an online shop's products by name or category | the user wants to buy something and is looking for it | products with id, price, rating and stock | query:string:What to find; max_price:number?:Highest price
shop_add_to_cart | Adds a product to the user's shopping cart | the user chose a product to buy | the cart's contents and total | product_id:string:From shop_search_products; quantity:integer?:Default 1
shop_checkout | Places the order for everything in the shopping cart | the user wants to pay and order the cart | the order number and delivery estimate | address_id:string?:Default the saved address
shop_track_order | Tracks an order's delivery | the user asks where their parcel is | the carrier, status and delivery estimate | order_id:string:The order number
shop_return_item | Starts a return for an item of a delivered order | the user wants to send something back | the return label and refund amount | order_id:string:The order number; product_id:string:The item; reason:string:Why
shop_order_history | Lists the user's past orders | the user asks what they bought or when | orders with date, items and total | months:integer?:How far back, default 6
shop_wishlist_add | Saves a product to the user's wishlist for later | the user wants to remember a product without buying it | the wishlist | product_id:string:From shop_search_products
music_play | Plays a song, album, artist or playlist on the user's speaker | the user wants music played | what is playing now | query:string:E.g. "Kind of Blue"; device:string?:Default the last used speaker
music_pause | Pauses the music that is playing | the user wants the music stopped or paused | the player's state | -
music_create_playlist | Creates a playlist from a list of songs | the user wants a new playlist | the playlist's id | name:string:The playlist name; songs:strings?:Song titles to add
music_search | Searches the music catalogue for songs, albums and artists | the user looks for music or information about a song | matches with title, artist and album | query:string:What to find
music_set_volume | Sets the speaker's volume | the user wants the music louder or quieter | the volume now | percent:integer:0 to 100
music_recently_played | Lists the songs the user played recently | the user asks what they listened to | songs with time played | limit:integer?:Default 20
home_set_thermostat | Sets the home thermostat to a temperature | the user wants the heating or cooling changed | the target and current temperature | celsius:number:Target temperature, e.g. 20.5; room:string?:Default the whole home
home_lights | Turns lights on or off or dims them | the user wants lights changed | the lights' state | room:string:E.g. "kitchen"; on:boolean:On or off; brightness:integer?:0 to 100
home_lock_door | Locks or unlocks a smart door lock | the user wants a door locked or unlocked | the lock's state | door:string:E.g. "front"; locked:boolean:Lock (true) or unlock (false)
home_camera_snapshot | Takes a snapshot from a home security camera | the user wants to see what a camera sees | the image's link and time | camera:string:E.g. "garden"
home_energy_usage | Reports the home's electricity use | the user asks how much energy they used | kWh per day and cost | days:integer?:Default 7
home_run_scene | Runs a saved smart-home scene such as "movie night" | the user names a scene | the devices the scene changed | scene:string:The scene's name
home_robot_vacuum | Starts or docks the robot vacuum | the user wants the floors vacuumed | the vacuum's state | action:enum(start/dock):What to do; room:string?:Only this room
fitness_log_workout | Records a workout: activity, duration and distance | the user did some exercise and wants it logged | the workout's id | activity:enum(run/walk/cycle/swim/gym):The activity; minutes:integer:How long; km:number?:Distance
fitness_steps | Gives the user's step counts per day | the user asks how many steps they walked | steps per day | days:integer?:Default 7
fitness_sleep | Gives the user's sleep by night: hours and quality | the user asks how they slept | hours and quality per night | nights:integer?:Default 7
fitness_set_goal | Sets a daily goal for steps, active minutes or sleep | the user wants a new fitness goal | the goal | metric:enum(steps/active_minutes/sleep_hours):Which; target:number:The daily target
fitness_heart_rate | Gives the user's resting and average heart rate by day | the user asks about their heart rate | heart rate per day | days:integer?:Default 7
recipe_search | Searches a recipe website by dish or ingredients | the user wants a recipe to cook (from the web, not their notes) | recipes with title, time and link | query:string:A dish or ingredients, e.g. "leek risotto"; max_minutes:integer?:Longest cooking time
recipe_nutrition | Gives the calories and nutrients of a recipe or food | the user asks how many calories something has | calories, protein, fat and carbohydrates | food:string:E.g. "200 g rice"
recipe_meal_plan | Plans meals for a number of days from preferences | the user wants a meal plan | meals per day with recipes | days:integer:How many days; diet:enum(any/vegetarian/vegan/gluten_free)?:Default any
recipe_shopping_list | Builds a shopping list from recipes | the user wants to know what to buy for some recipes | ingredients with amounts, grouped by aisle | recipe_ids:strings:Ids from recipe_search
translate_text | Translates text into another language | the user wants something said in another language | the translation | text:string:The text; to:string:Target language code, e.g. "de"
translate_detect_language | Detects which language a text is written in | the user asks what language a text is | the language and confidence | text:string:The text
translate_document | Translates a document in the drive and saves the translation beside it | the user wants a whole file translated | the translated file's id | file_id:string:The file's id; to:string:Target language code
units_convert | Converts a quantity between units (length, weight, volume, temperature) | the user asks how many of one unit are in another | the converted quantity | value:number:E.g. 5; from:string:E.g. "miles"; to:string:E.g. "km"
math_calculate | Evaluates an arithmetic expression exactly | the user asks for a calculation | the result | expression:string:E.g. "(12.5 * 4) / 3"
math_percentage | Works out percentages: a share, a change or a discount | the user asks what percent something is, or a price after a discount | the percentage or amount | value:number:The amount; percent:number:The percentage
math_loan_payment | Computes the monthly payment of a loan | the user asks what a loan or mortgage would cost per month | the monthly payment and total interest | principal:number:Amount borrowed; annual_rate:number:Percent per year; years:integer:Term
time_now_in | Gives the current time in a city | the user asks what time it is somewhere | the local time and UTC offset | city:string:The city
time_convert | Converts a time from one time zone to another | the user asks what a time in one place is in another | the converted time | time:datetime:The time; to_zone:string:IANA zone, e.g. "Asia/Tokyo"
time_set_timer | Starts a countdown timer | the user wants a timer | the timer's id and end time | minutes:integer:How long; label:string?:E.g. "pasta"
time_set_alarm | Sets an alarm on the user's phone | the user wants to be woken or alerted at a time | the alarm | at:string:Time of day, e.g. "07:30"; days:strings?:Repeat on these weekdays
news_headlines | Gives today's top news headlines, by topic | the user asks what is in the news | headlines with source and link | topic:enum(world/business/technology/sports/science)?:Default world
news_search | Searches news articles | the user asks for news about a subject | articles with title, source, date and link | query:string:The subject; days:integer?:How far back, default 7
news_follow_topic | Follows a topic so new articles about it are collected | the user wants to be kept up to date on a subject | the followed topics | topic:string:The subject
news_summarize_article | Summarizes a news article at a URL | the user wants the gist of an article | a short summary | url:string:The article's URL
stocks_quote | Gives a stock's current price and day change | the user asks what a share is trading at | price, change and volume | symbol:string:Ticker, e.g. "AAPL"
stocks_history | Gives a stock's daily closing prices | the user asks how a share performed | closing price per day | symbol:string:Ticker; days:integer?:Default 30
stocks_portfolio | Shows the user's investment portfolio and its value | the user asks how their investments are doing | holdings with value and gain | -
stocks_place_order | Places an order to buy or sell shares | the user wants to buy or sell a stock | the order's id and status | symbol:string:Ticker; side:enum(buy/sell):Buy or sell; quantity:integer:Shares
stocks_watchlist_add | Adds a stock to the user's watchlist | the user wants to keep an eye on a share | the watchlist | symbol:string:Ticker
bank_balance | Gives the balance of the user's bank accounts | the user asks how much money they have | balances per account | -
bank_transactions | Lists the transactions of a bank account | the user asks what they spent or were paid | transactions with date, payee and amount | account:string?:Default the main account; days:integer?:Default 30
bank_transfer | Transfers money between the user's accounts or to a saved payee | the user wants money sent or moved | the transfer's reference | to:string:A saved payee or account; amount:number:How much; note:string?:Reference
bank_freeze_card | Freezes or unfreezes a bank card | the user lost a card or found it again | the card's state | card_last4:string:Last four digits; frozen:boolean:Freeze or unfreeze
bank_pay_bill | Pays a bill to a company from the main account | the user wants a bill paid | the payment's reference | payee:string:The company; amount:number:How much; due:date?:When
bank_spending_summary | Sums the user's spending by category | the user asks where their money goes | totals per category | month:string?:E.g. "2026-01", default this month
invoice_create | Creates an invoice for a client | the user wants to bill a client | the invoice's number and link | client:string:The client's name; amount:number:Total; due:date?:Payment due
invoice_send | Emails an invoice to the client | the user wants an invoice that exists sent | when it was sent | invoice_number:string:The invoice's number
invoice_list_unpaid | Lists invoices that clients have not paid | the user asks who still owes them money | unpaid invoices with client, amount and days late | -
invoice_mark_paid | Marks an invoice as paid | the user says a client paid | the invoice's state | invoice_number:string:The invoice's number; paid_on:date?:Default today
invoice_remind_client | Sends a payment reminder for an overdue invoice | the user wants a late client reminded | when the reminder went | invoice_number:string:The invoice's number
invoice_void | Voids an invoice that was issued by mistake | the user wants an invoice cancelled | the invoice's state | invoice_number:string:The invoice's number; reason:string:Why
hr_request_leave | Requests days off from work | the user wants holiday or leave booked | the request's id and status | from:date:First day; to:date:Last day; kind:enum(holiday/sick/unpaid)?:Default holiday
hr_leave_balance | Tells how many days of leave the user has left | the user asks how much holiday they have | days left by kind | -
hr_payslip | Gives the user's payslip for a month | the user asks about their salary or pay | gross, net and deductions | month:string:E.g. "2026-01"
hr_org_chart | Shows who reports to whom around a person | the user asks who someone's manager or team is | the person's manager and reports | person:string:Name or email
hr_submit_timesheet | Submits the hours the user worked in a week | the user wants their timesheet filed | the timesheet's status | week_of:date:The Monday; hours:number:Total hours
hr_directory_search | Searches the company directory for colleagues | the user looks for a colleague's role, office or phone | people with role, team, office and phone | query:string:Name, role or team
ticket_create | Opens a support ticket with the IT help desk | the user has a problem with a work computer, account or software | the ticket's number | subject:string:The problem; details:string?:More; urgency:enum(low/normal/high)?:Default normal
ticket_status | Gives the status of a help-desk ticket | the user asks about a ticket they opened | status, assignee and last update | ticket:string:The ticket number
ticket_add_comment | Adds a comment to a help-desk ticket | the user has more information for a ticket | the comment | ticket:string:The ticket number; text:string:The comment
ticket_close | Closes a help-desk ticket that is solved | the user says their problem is fixed | the ticket's status | ticket:string:The ticket number
ticket_list_mine | Lists the help-desk tickets the user opened | the user asks which tickets they have open | tickets with status | status:enum(open/closed/all)?:Default open
ticket_reset_password | Sends a password-reset link for a work account | the user is locked out or forgot a password | where the link was sent | account:string:The account, e.g. "vpn"
wiki_search | Searches the company wiki | the user looks for a policy, how-to or page on the wiki | pages with title, space and link | query:string:Words to find
wiki_create_page | Creates a page on the company wiki | the user wants something published on the wiki | the page's link | space:string:The wiki space; title:string:The title; body:string:The text
wiki_update_page | Replaces the text of an existing wiki page | the user wants a wiki page corrected | the page's new version | page_id:string:From wiki_search; body:string:The new text
wiki_page_history | Lists who changed a wiki page and when | the user asks who edited a page | versions with author and time | page_id:string:From wiki_search
wiki_read_page | Reads the text of a wiki page | the user wants to know what a wiki page says | the page's text | page_id:string:From wiki_search
photos_search | Searches the user's photo library by place, date or what is in the picture | the user looks for photos | photos with id, date and place | query:string:E.g. "beach 2024"
photos_create_album | Creates a photo album from photos | the user wants photos grouped in an album | the album's id | name:string:The album name; photo_ids:strings:From photos_search
photos_share_album | Shares a photo album by link | the user wants to show an album to someone | the link | album_id:string:The album; email:string?:Send the link to this person
photos_delete | Deletes photos from the library | the user wants photos removed | how many were deleted | photo_ids:strings:From photos_search
photos_edit | Applies a simple edit to a photo: rotate, crop to a ratio, auto-enhance | the user wants a photo fixed | the edited photo's id | photo_id:string:From photos_search; edit:enum(rotate/crop_square/enhance):The edit
meeting_create_link | Creates a video-meeting link | the user needs a video call link | the link and dial-in | title:string:The meeting's name; minutes:integer?:Default 60
meeting_transcript | Gets the transcript of a recorded video meeting | the user wants to know what was said in a recorded call | the transcript | meeting_id:string:The meeting's id
meeting_recordings | Lists the user's recorded video meetings | the user asks for their recordings | recordings with title, date and length | days:integer?:Default 30
meeting_join | Joins a video meeting from its link | the user wants to join a call now | the meeting's state | link:string:The meeting link
meeting_summarize | Summarizes a recorded video meeting: decisions and action items | the user wants the outcome of a recorded call | decisions and action items | meeting_id:string:The meeting's id
analytics_run_query | Runs a read-only SQL query on the company's analytics warehouse | the user asks a question about business data that needs a query | the rows, at most 200 | sql:string:A SELECT statement
analytics_dashboard | Gives the current figures of a saved dashboard | the user asks for a dashboard's numbers | the dashboard's tiles and values | dashboard:string:Its name, e.g. "Weekly sales"
analytics_list_tables | Lists the tables of the analytics warehouse with their columns | the user or a query needs to know what data exists | tables with columns and descriptions | schema:string?:Default all
analytics_schedule_report | Emails a dashboard to people on a schedule | the user wants a report sent regularly | the schedule | dashboard:string:Its name; emails:strings:Recipients; every:enum(day/week/month):How often
analytics_export_csv | Exports a query's result as a CSV file | the user wants data as a spreadsheet | the file's link | sql:string:A SELECT statement
expense_submit | Submits an expense claim with its receipt | the user paid for something for work and wants it back | the claim's id | amount:number:How much; category:enum(travel/meals/equipment/other):What for; description:string:What it was
expense_status | Gives the status of the user's expense claims | the user asks whether an expense was approved or paid | claims with status | -
expense_approve | Approves or rejects an expense claim of someone the user manages | the user is a manager deciding on a claim | the claim's status | claim_id:string:The claim; approve:boolean:Approve or reject
expense_policy | Tells the company's expense limits for a category | the user asks whether an expense is allowed | the limits and rules | category:enum(travel/meals/equipment/other):Which
expense_scan_receipt | Reads a photographed receipt into amount, merchant and date | the user has a receipt photo to turn into an expense | the amount, merchant and date | photo_id:string:The receipt photo's id
podcast_search | Searches podcasts and episodes | the user looks for a podcast | shows and episodes with length | query:string:What to find
podcast_subscribe | Subscribes to a podcast | the user wants new episodes of a show | the subscriptions | show_id:string:From podcast_search
podcast_play_episode | Plays a podcast episode | the user wants to listen to an episode | what is playing | episode_id:string:From podcast_search
podcast_new_episodes | Lists new episodes of the podcasts the user follows | the user asks what is new in their podcasts | episodes with show and date | -
reminder_create | Sets a phone reminder that alerts the user at a time | the user wants to be alerted at a time (a phone alert, not a note) | the reminder's id | text:string:What to remind; at:datetime:When
reminder_list | Lists the user's phone reminders | the user asks which reminders are set | reminders with time | -
reminder_delete | Deletes a phone reminder | the user wants a reminder removed | the id of the removed reminder | reminder_id:string:From reminder_list
reminder_snooze | Snoozes a phone reminder that went off | the user wants to be reminded again later | the new time | reminder_id:string:From reminder_list; minutes:integer:How much later
car_find_parking | Finds parking near an address, with prices | the user needs somewhere to park | car parks with price and free spaces | near:string:An address
car_charging_stations | Finds electric-car charging stations near a place | the user needs to charge an electric car | stations with power and availability | near:string:An address; min_kw:integer?:Fastest needed
car_service_booking | Books a service appointment for the user's car | the user's car needs servicing | the appointment | date:date:Preferred day; garage:string?:Default the usual garage
car_fuel_prices | Gives fuel prices at stations near a place | the user wants cheap fuel | stations with prices | near:string:An address; fuel:enum(petrol/diesel)?:Default petrol
car_lock_status | Tells whether the user's connected car is locked and where it is | the user asks where their car is or whether it is locked | location, lock state and fuel level | -
"""

def prop(kind, desc):
    if kind == "string":
        return {"type": "string", "description": desc}
    if kind == "integer":
        return {"type": "integer", "description": desc}
    if kind == "number":
        return {"type": "number", "description": desc}
    if kind == "boolean":
        return {"type": "boolean", "description": desc}
    if kind == "date":
        return {"type": "string", "format": "date", "description": desc}
    if kind == "datetime":
        return {"type": "string", "format": "date-time", "description": desc}
    if kind == "strings":
        return {"type": "array", "items": {"type": "string"}, "description": desc}
    if kind.startswith("enum("):
        return {"type": "string", "enum": kind[5:-1].split("/"), "description": desc}
    raise SystemExit(f"unknown type {kind}")


def main():
    rows = [line for line in TOOLS.strip().splitlines() if line.strip()]
    tools = []
    for line in rows:
        name, does, use_when, returns, params = [p.strip() for p in line.split("|")]
        properties, required = {}, []
        if params != "-":
            for param in params.split(";"):
                pname, kind, desc = param.strip().split(":", 2)
                optional = kind.endswith("?")
                kind = kind.rstrip("?")
                properties[pname] = prop(kind, desc)
                if not optional:
                    required.append(pname)
        schema = {"type": "object", "properties": properties, "required": required,
                  "additionalProperties": False}
        if not required:
            del schema["required"]
        tools.append({"name": name, "does": does + ".", "use_when": use_when + ".",
                      "returns": returns + ".", "input_schema": schema})
    # When not to use it: the nearest sibling in the same namespace (the next one, or the one
    # before for the last).
    for i, tool in enumerate(tools):
        ns = tool["name"].split("_")[0]
        siblings = [t for t in tools if t["name"].split("_")[0] == ns and t is not tool]
        if siblings:
            after = [t for t in siblings if tools.index(t) > i]
            sib = (after or siblings)[0]
            what = sib["does"][0].lower() + sib["does"][1:].rstrip(".")
            tool["avoid_when"] = f"you need the tool that {what}: use {sib['name']}."
    names = [t["name"] for t in tools]
    assert len(names) == len(set(names)), "duplicate names"
    out = pathlib.Path(__file__).resolve().parent.parent / "evals" / "tool-search" / "catalogue.json"
    doc = {
        "about": "Fixture tools of the tool-search eval (toolgate eval tool-search), written by "
                 "scripts/make-tool-catalogue.py. Realistic, distinct definitions; their handlers "
                 "only acknowledge the call, because the eval checks which tool the model chose "
                 "first, never what the tool did.",
        "tools": tools,
    }
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(tools)} tools -> {out}")


main()
