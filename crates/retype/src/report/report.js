// The report's behaviour: a link to a part or section opens it (and every
// part around it) before the browser scrolls to it.
"use strict";
(function () {
  function reveal(id) {
    const target = document.getElementById(id);
    for (let el = target; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") el.open = true;
    }
    return target;
  }
  document.addEventListener("click", (e) => {
    const a = e.target.closest('a[href^="#"]');
    if (!a) return;
    const target = reveal(a.getAttribute("href").slice(1));
    if (target) {
      e.preventDefault();
      target.scrollIntoView();
      history.replaceState(null, "", a.getAttribute("href"));
    }
  });
  if (location.hash) reveal(location.hash.slice(1));
})();
