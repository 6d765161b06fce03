-- Search (docs/api.md, "Searching"): what is computed when text is stored,
-- so that a search never parses it.
--
-- The current definition of each function; db.Migrate applies this file
-- after the migrations (CREATE OR REPLACE), so a change to a function is
-- an edit here. See db/README.md.

-- _file_text_vector is the search vector of a text file's text
-- (convo.file_texts, 00028_file_text_search.sql), computed once when its
-- upload commits. It never fails for the text's size or shape: a text
-- whose words would make a tsvector over PostgreSQL's 1 MB limit (many
-- distinct words, each hyphenated or dotted word counted again by its
-- parts) is indexed from its first half, and again, until it fits: the
-- file is then searchable in its first part. Words over 2,047 characters
-- are skipped, and positions past 16,383 count as 16,383 (PostgreSQL's
-- own limits: a phrase deep in a large file may match loosely).
CREATE OR REPLACE FUNCTION convo._file_text_vector(p_text text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    LOOP
        BEGIN
            RETURN to_tsvector('english', p_text);
        EXCEPTION WHEN program_limit_exceeded THEN
            p_text := left(p_text, length(p_text) / 2);
        END;
    END LOOP;
END;
$$;
