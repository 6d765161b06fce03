// Package files serves files over plain HTTP (docs/files.md):
//
//   - POST /v1/files: upload one file, a multipart/form-data body whose
//     part named "file" is streamed into files.Service.Upload (never
//     buffered whole), answered 201 with the file's JSON;
//   - GET /v1/files/{id}: the file's JSON, with a fresh signed URL;
//   - GET /v1/files/{id}/content: its bytes, with a single Range, ETag and
//     If-None-Match, served so that a browser never runs them in convo's
//     origin (nosniff, a sandbox CSP, attachment unless a raster image).
//
// The content route takes a bearer token as every route does, or instead
// a signed URL's exp and sig (files.Signer), which an <img src> can carry.
// Another user's file is not found, in every route.
package files
