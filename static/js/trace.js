// The run page's transcript: steps folded to one line, opened one by one, all at once, by keyboard (j / k: next /
// previous step, o: open or close it) or by a link to #step-N (a step before the page's first is loaded first),
// and a search's words highlighted in what the steps show.
(function () {
  "use strict";

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll("#steps > li.step"));
  }

  function card(item) {
    return item.querySelector("details.step-card");
  }

  function current() {
    return document.querySelector("#steps > li.step.current");
  }

  function select(item, open) {
    var before = current();
    if (before) before.classList.remove("current");
    item.classList.add("current");
    if (open) card(item).open = true;
    item.scrollIntoView({ block: "start" });
  }

  // #step-N: open that step; if it comes before the first step shown, load earlier pages until it is there.
  var wanted = null;
  function openWanted() {
    if (wanted === null) return;
    var item = document.getElementById("step-" + wanted);
    if (item && card(item)) {
      wanted = null;
      select(item, true);
      return;
    }
    var earlier = document.querySelector("#earlier a[data-before]");
    if (earlier && Number(earlier.dataset.before) > wanted && window.htmx) {
      window.htmx.trigger(earlier, "click");
    } else {
      wanted = null; // not on this page (another filter, or no such step)
    }
  }

  function followHash() {
    var match = /^#step-(\d+)$/.exec(window.location.hash);
    if (!match) return;
    wanted = Number(match[1]);
    openWanted();
  }

  // The search's words, marked in the text of the steps shown (never inside a tag: text nodes only).
  function highlight(root) {
    var steps = document.getElementById("steps");
    var words = steps && steps.dataset.highlight;
    if (!words) return;
    var needle = words.toLowerCase();
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        if (node.parentNode.closest("mark.hit, script, summary.step-line")) return NodeFilter.FILTER_REJECT;
        return node.nodeValue.toLowerCase().indexOf(needle) >= 0 ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT;
      },
    });
    var found = [];
    while (walker.nextNode()) found.push(walker.currentNode);
    found.forEach(function (node) {
      var text = node.nodeValue;
      var lower = text.toLowerCase();
      var fragment = document.createDocumentFragment();
      var at = 0;
      var hit;
      while ((hit = lower.indexOf(needle, at)) >= 0) {
        fragment.appendChild(document.createTextNode(text.slice(at, hit)));
        var mark = document.createElement("mark");
        mark.className = "hit";
        mark.textContent = text.slice(hit, hit + needle.length);
        fragment.appendChild(mark);
        at = hit + needle.length;
      }
      fragment.appendChild(document.createTextNode(text.slice(at)));
      node.parentNode.replaceChild(fragment, node);
    });
    // A step that matches opens, so that what matched shows.
    root.querySelectorAll("mark.hit").forEach(function (mark) {
      var details = mark.closest("details.step-card");
      if (details) details.open = true;
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target.closest && event.target.closest("input, textarea, select, button, [contenteditable]")) return;
    var list = cards();
    if (!list.length) return;
    var at = list.indexOf(current());
    if (event.key === "j") select(list[Math.min(at + 1, list.length - 1)], false);
    else if (event.key === "k") select(list[Math.max(at - 1, 0)], false);
    else if (event.key === "o" && at >= 0) card(list[at]).open = !card(list[at]).open;
    else return;
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-fold]");
    if (!button) return;
    var open = button.dataset.fold === "open";
    cards().forEach(function (item) {
      card(item).open = open;
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var steps = document.getElementById("steps");
    if (steps) highlight(steps);
    followHash();
  });
  window.addEventListener("hashchange", followHash);
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.elt || event.target;
    if (target && target.closest && target.closest("#steps, #trace")) highlight(document.getElementById("steps"));
    openWanted();
  });
})();
