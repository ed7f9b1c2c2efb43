-- The book catalogue (crates/toolgate-books): the same columns as its SQLite file, loaded with
-- the embedded catalogue by the first instance that opens an empty table.
CREATE TABLE books (
    book_id BIGINT PRIMARY KEY,
    title TEXT NOT NULL,
    authors TEXT NOT NULL,
    original_publication_year BIGINT,
    average_rating DOUBLE PRECISION NOT NULL,
    ratings_count BIGINT NOT NULL,
    language_code TEXT,
    my_tags TEXT NOT NULL DEFAULT '',
    my_status TEXT CHECK (my_status IN ('want_to_read', 'reading', 'read'))
);
