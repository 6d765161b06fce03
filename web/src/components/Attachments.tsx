import { useCallback, useRef, useState, type DragEvent } from "react";
import type { FileInfo, FileState } from "@convo/client";
import { formatBytes, type Upload } from "@convo/react";

/**
 * The types shown as a thumbnail: those the server serves inline (raster
 * images). Every other file, SVG included, is a chip that downloads.
 */
const imageTypes = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

export const isImage = (mediaType: string) => imageTypes.has(mediaType.split(";")[0].trim());

type Shown = Pick<FileState, "id" | "filename" | "mediaType" | "size" | "url">;

/**
 * FileLink shows one file: an image as a thumbnail, anything else as a
 * chip with its name and size; a click opens it (its signed url) in a new
 * tab.
 */
export function FileLink({ file }: { file: Shown }) {
  const title = `${file.filename} · ${formatBytes(file.size)}`;
  if (isImage(file.mediaType) && file.url) {
    return (
      <a className="attachment-image" href={file.url} target="_blank" rel="noopener noreferrer" title={title}>
        <img src={file.url} alt={file.filename} loading="lazy" />
      </a>
    );
  }
  return (
    <a
      className="attachment-chip"
      href={file.url || undefined}
      target="_blank"
      rel="noopener noreferrer"
      title={title}
      aria-disabled={!file.url}
    >
      <FileIcon />
      <span className="attachment-name">{file.filename}</span>
      <span className="attachment-size">{formatBytes(file.size)}</span>
    </a>
  );
}

/** MessageFiles lists the files a message holds. */
export function MessageFiles({ files }: { files: readonly Shown[] }) {
  if (files.length === 0) return null;
  return (
    <div className="attachments" role="list" aria-label="Attached files">
      {files.map((f) => (
        <div role="listitem" key={f.id} className="attachment" data-file-id={f.id}>
          <FileLink file={f} />
        </div>
      ))}
    </div>
  );
}

/**
 * UploadList shows a composer's uploads: each with its progress while
 * uploading, as the file once done, or with why it was refused or
 * failed; each can be removed (an upload in flight is aborted).
 */
export function UploadList({ uploads, onRemove }: { uploads: readonly Upload[]; onRemove: (id: string) => void }) {
  if (uploads.length === 0) return null;
  return (
    <ul className="attachments uploads" aria-label="Files to send">
      {uploads.map((u) => (
        <li key={u.id} className={`attachment upload upload-${u.status}`} data-status={u.status}>
          {u.status === "done" && u.file ? (
            <FileLink file={u.file} />
          ) : (
            <span className="attachment-chip">
              <FileIcon />
              <span className="attachment-name">{u.name}</span>
              <span className="attachment-size">{formatBytes(u.size)}</span>
            </span>
          )}
          {u.status === "uploading" ? (
            <span
              className="upload-progress"
              role="progressbar"
              aria-label={`Uploading ${u.name}`}
              aria-valuemin={0}
              aria-valuemax={100}
              aria-valuenow={Math.round(u.progress * 100)}
            >
              <span className="upload-progress-bar" style={{ width: `${Math.round(u.progress * 100)}%` }} />
            </span>
          ) : null}
          {u.error ? (
            <span className="upload-error" role="alert">
              {u.error}
            </span>
          ) : null}
          <button type="button" className="ghost small upload-remove" aria-label={`Remove ${u.name}`} onClick={() => onRemove(u.id)}>
            ×
          </button>
        </li>
      ))}
    </ul>
  );
}

/** KeptFiles lists the files an edited message keeps, each removable. */
export function KeptFiles({ files, onRemove }: { files: readonly FileInfo[] | readonly FileState[]; onRemove: (id: string) => void }) {
  if (files.length === 0) return null;
  return (
    <ul className="attachments uploads" aria-label="Files the message keeps">
      {files.map((f) => (
        <li key={f.id} className="attachment upload upload-done">
          <FileLink file={f} />
          <button type="button" className="ghost small upload-remove" aria-label={`Remove ${f.filename}`} onClick={() => onRemove(f.id)}>
            ×
          </button>
        </li>
      ))}
    </ul>
  );
}

function FileIcon() {
  return (
    <svg className="attachment-icon" viewBox="0 0 16 16" width="16" height="16" aria-hidden="true">
      <path
        d="M4 1.5h5l3.5 3.5v9a.5.5 0 0 1-.5.5H4a.5.5 0 0 1-.5-.5V2a.5.5 0 0 1 .5-.5z M9 1.5V5h3.5"
        fill="none"
        stroke="currentColor"
        strokeWidth="1.2"
        strokeLinejoin="round"
      />
    </svg>
  );
}

/**
 * useFileDrop makes an element a drop target for files: dragging shows
 * while files are dragged over it; a drop gives them to onFiles. Drags of
 * anything but files (text, links) are left to the browser.
 */
export function useFileDrop(onFiles: (files: File[]) => void) {
  const [dragging, setDragging] = useState(false);
  const depth = useRef(0);
  const hasFiles = (e: DragEvent) => Array.from(e.dataTransfer?.types ?? []).includes("Files");
  const onDragEnter = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth.current++;
    setDragging(true);
  }, []);
  const onDragOver = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = "copy";
  }, []);
  const onDragLeave = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    depth.current = Math.max(0, depth.current - 1);
    if (depth.current === 0) setDragging(false);
  }, []);
  const onDrop = useCallback(
    (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      depth.current = 0;
      setDragging(false);
      const files = Array.from(e.dataTransfer.files);
      if (files.length > 0) onFiles(files);
    },
    [onFiles],
  );
  return { dragging, handlers: { onDragEnter, onDragOver, onDragLeave, onDrop } };
}
