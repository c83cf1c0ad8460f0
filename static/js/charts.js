// Draw every chart on the page: each <div class="chart" data-figure="ID"> gets the figure JSON of <script id="ID">.
function drawCharts(root) {
  (root || document).querySelectorAll(".chart[data-figure]").forEach(function (element) {
    var source = document.getElementById(element.dataset.figure);
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    // On a narrow screen the toolbar would sit on the title (a tap shows it): there is none there.
    var narrow = window.matchMedia("(max-width: 600px)").matches;
    var config = { displaylogo: false, responsive: true, displayModeBar: narrow ? false : "hover" };
    window.Plotly.react(element, figure.data, figure.layout, config).then(function () {
      if (element.dataset.clickable) return;
      element.dataset.clickable = "1";
      // A point whose customdata is [label, href] opens href: the runs behind it, or a step of this page (#step-N).
      element.on("plotly_click", function (event) {
        var data = event.points.length ? event.points[0].customdata : null;
        if (!Array.isArray(data) || typeof data[1] !== "string") return;
        if (data[1].charAt(0) === "/") window.location.assign(data[1]);
        else if (data[1].charAt(0) === "#") {
          if (window.location.hash === data[1]) window.dispatchEvent(new HashChangeEvent("hashchange"));
          else window.location.hash = data[1];
        }
      });
    });
  });
}
document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
document.addEventListener("htmx:afterSwap", function (event) { drawCharts(event.target); });
document.addEventListener("htmx:oobAfterSwap", function (event) { drawCharts(event.detail.target); });
