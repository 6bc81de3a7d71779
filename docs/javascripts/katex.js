// Typesets the formulas of docstrings and pages ($...$ and $$...$$, which
// pymdownx.arithmatex turns into \(...\) and \[...\] inside "arithmatex" elements) with the
// KaTeX served from docs/vendor/katex. Material for MkDocs swaps pages without reloading
// them: typeset each new page.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\[", right: "\\]", display: true },
      { left: "\\(", right: "\\)", display: false },
    ],
    throwOnError: false,
  });
});
