-- Which catalogue each call was decided against (the dispatcher's registry digest: every tool's
-- name, version and model view), so an audit can tell catalogue versions apart. Rows written
-- before this column existed keep NULL.
ALTER TABLE decisions ADD COLUMN catalogue_digest TEXT;
