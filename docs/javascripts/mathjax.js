// MathJax settings for the formulas in docstrings ($...$ and $$...$$, which
// pymdownx.arithmatex turns into \(...\) and \[...\] inside "arithmatex" elements).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

// Material for MkDocs swaps pages without reloading them: typeset each new page.
document$.subscribe(() => {
  MathJax.typesetPromise();
});
