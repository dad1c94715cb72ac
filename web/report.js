// The study report's script (dltune report), embedded in the page at build time (src/report/CMakeLists.txt).
// Draws every chart: the specs are data (a JSON script element), never markup.
(function () {
  'use strict';
  var charts = JSON.parse(document.getElementById('dltune-chart-specs').textContent);
  var drawn = charts.map(function (chart) {
    var element = document.getElementById(chart.id);
    // The element keeps its view (for the console, and the browser tests that read what it drew).
    return vegaEmbed(element, chart.spec, {actions: false, renderer: 'svg'}).then(function (result) {
      element.vegaView = result.view;
    }).catch(function (error) {
      element.textContent = 'This chart could not be drawn: ' + error;
      element.className += ' failed';
      console.error('dltune: ' + chart.id + ': ' + error);
    });
  });
  Promise.all(drawn).then(function () {
    document.body.setAttribute('data-charts-drawn', String(charts.length));
  });
})();
