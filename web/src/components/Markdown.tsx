// Markdown from model output, rendered as React elements: raw HTML in the
// text is never interpreted (no innerHTML anywhere), link URLs go through
// react-markdown's safe-protocol filter (no javascript: links), and images
// become links so model output cannot load remote resources by itself.

import { memo } from "react";
import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";

const components: Components = {
  a: ({ node: _node, href, children, ...rest }) => (
    <a {...rest} href={href} target="_blank" rel="noopener noreferrer nofollow">
      {children}
    </a>
  ),
  img: ({ src, alt }) =>
    typeof src === "string" && src ? (
      <a href={src} target="_blank" rel="noopener noreferrer nofollow">
        {alt ? `[image: ${alt}]` : "[image]"}
      </a>
    ) : (
      <span>{alt ? `[image: ${alt}]` : "[image]"}</span>
    ),
};

const plugins = [remarkGfm];

export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown remarkPlugins={plugins} components={components} skipHtml={false}>
        {text}
      </ReactMarkdown>
    </div>
  );
});
