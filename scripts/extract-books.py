#!/usr/bin/env python3
"""Make data/goodbooks-10k/books-300.csv from the goodbooks-10k books.csv.

Keeps the first 300 rows in file order (book_id 1-300) and the seven columns the book catalogue
uses. Empty cells stay empty (the loader turns them into NULL). Publication years are written as
integers ("2008.0" -> "2008"). Usage: extract-books.py SOURCE_CSV DEST_CSV
"""
import csv
import sys

COLUMNS = ["book_id", "title", "authors", "original_publication_year",
           "average_rating", "ratings_count", "language_code"]


def main(source: str, dest: str) -> None:
    with open(source, newline="", encoding="utf-8") as src:
        rows = list(csv.DictReader(src))[:300]
    with open(dest, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            year = row["original_publication_year"]
            row["original_publication_year"] = str(int(float(year))) if year else ""
            writer.writerow([row[c] for c in COLUMNS])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: extract-books.py SOURCE_CSV DEST_CSV")
    main(sys.argv[1], sys.argv[2])
