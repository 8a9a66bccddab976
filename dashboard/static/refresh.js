// Live pages (body data-refresh="on") reload every 10 s, but only while the tab is
// visible: a hidden tab stops polling and reloads once when it is shown again.
(function () {
  "use strict";
  if (document.body.dataset.refresh !== "on") return;
  var every = 10000, timer = null;
  function schedule() {
    clearTimeout(timer);
    if (!document.hidden) timer = setTimeout(function () { location.reload(); }, every);
  }
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
