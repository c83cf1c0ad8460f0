// Draw every chart on the page: each <div class="chart" data-figure="ID"> gets the figure JSON of <script id="ID">.
function drawCharts(root) {
  (root || document).querySelectorAll(".chart[data-figure]").forEach(function (element) {
    var source = document.getElementById(element.dataset.figure);
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    window.Plotly.react(element, figure.data, figure.layout, { displaylogo: false, responsive: true });
  });
}
document.addEventListener("DOMContentLoaded", function () { drawCharts(document); });
document.addEventListener("htmx:afterSwap", function (event) { drawCharts(event.target); });
