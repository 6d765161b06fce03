// Package files keeps the files of conversations: images, PDFs, documents
// a user uploads and messages hold (docs/files.md).
//
// A Service does the upload: it checks the filename, decides the media
// type from the bytes, hashes and counts the bytes while they stream into
// a Blobs (never holding the whole file), stops at the size limit, shares
// the bytes of an owner's identical uploads, and enforces the per-user
// quota. The metadata is kept by a Store (PostgreSQL: postgres.FileStore),
// the bytes by a Blobs (postgres.FileBlobs, or an S3-compatible store).
// Collect is the garbage collector the maintenance loop runs. There is no
// HTTP here: package httpapi/files serves it.
package files
