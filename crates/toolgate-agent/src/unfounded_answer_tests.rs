use super::*;

const QUESTION: &str = "What budget did we settle on in the last meeting with the design team?";
/// The demo's search result, shortened: the hit that holds the answer.
const HIT: &str = r#"{"result":{"match":"all_words","total_matches":3,"hits":[{"id":5,"title":"Design team sync — Q1 budget settled","notebook":"Work","text":"Attendees: Priya, Marco, Lena, Tomás (finance), me.\n\n## Budget\nThe design team budget came in at $6,000 over. We settled on $48,000, final."}]},"next_step":"the first hit's whole text is above: if it answers the question, answer from it"}"#;

#[test]
fn a_polite_close_or_a_give_up_after_a_hit_is_unfounded() {
    for answer in [
        // evals/runs/demo-first-step-notes-v9-embedded, seed 4.
        "Let me know if you'd like me to provide any further assistance.",
        // Seed 2: after the repeat notice.
        "I am sorry, but I cannot answer this question without more information.",
        // Opening words the results also open sentences with are not names.
        "The results do not say. Budget notes are above.",
    ] {
        let found = unfounded_answer(answer, &[QUESTION], &[HIT]);
        assert_eq!(
            found,
            Some(Unfounded {
                data_tokens: 0,
                results: 1
            }),
            "{answer}"
        );
    }
}

#[test]
fn an_answer_with_a_figure_or_a_name_from_the_results_is_founded() {
    for answer in [
        "The budget settled on in the last meeting with the design team was $48,000.",
        "We settled on 48000 dollars.",
        "Priya and Marco were there.",
        "Attendees were Lena and others.",
        // A wrong figure of the right note still comes from the results: founded (the eval,
        // not this lever, judges it).
        "It came in at $6,000 over.",
    ] {
        assert_eq!(
            unfounded_answer(answer, &[QUESTION], &[HIT]),
            None,
            "{answer}"
        );
    }
}

#[test]
fn a_figure_the_results_never_gave_does_not_found_an_answer() {
    let found = unfounded_answer("The design team settled on $50,000.", &[QUESTION], &[HIT]);
    assert_eq!(
        found,
        Some(Unfounded {
            data_tokens: 1,
            results: 1
        })
    );
}

#[test]
fn restating_the_users_names_founds_nothing() {
    let question = "What did Priya say about the Q1 budget?";
    // "Priya" and "Q1" are the user's: the answer adds nothing from the result.
    let found = unfounded_answer(
        "I could not find what Priya said about Q1.",
        &[question],
        &[HIT],
    );
    assert!(found.is_some(), "{found:?}");
    // The same name is founded when the user did not give it.
    assert_eq!(
        unfounded_answer("Priya was at the meeting.", &[QUESTION], &[HIT]),
        None
    );
}

#[test]
fn without_a_successful_result_no_answer_is_judged() {
    assert_eq!(
        unfounded_answer("Let me know if you need anything else.", &[QUESTION], &[]),
        None
    );
}

#[test]
fn a_sentences_first_word_and_i_are_not_names() {
    let tokens = data_tokens("Budget is set. I think Marco agreed! Then Lena left?\nWork on it");
    assert_eq!(
        tokens.into_iter().collect::<Vec<_>>(),
        ["lena", "marco"],
        "sentence starts (Budget, Then, Work) and I are not names"
    );
}

#[test]
fn figures_keep_their_separators_inside_and_split_at_dashes() {
    let tokens = data_tokens("It was $48,000 (2.5 more) on 2025-12-02, then 7.");
    assert_eq!(
        tokens.into_iter().collect::<Vec<_>>(),
        ["02", "12", "2025", "25", "48000", "7"]
    );
}
