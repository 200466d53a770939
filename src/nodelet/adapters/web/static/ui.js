// nodelet web UI: the only script is an opt-in auto-refresh (remembered in localStorage).
(function () {
  "use strict";
  var KEY = "nodelet.autorefresh";
  var PERIOD_MS = 3000;
  document.documentElement.setAttribute("data-js", "on");  // tests: the script ran
  var box = document.getElementById("autorefresh");
  if (!box) { return; }
  var timer = null;
  function apply() {
    if (timer !== null) { clearTimeout(timer); timer = null; }
    if (box.checked) { timer = setTimeout(function () { location.reload(); }, PERIOD_MS); }
  }
  try { box.checked = localStorage.getItem(KEY) === "1"; } catch (e) { /* storage disabled */ }
  box.addEventListener("change", function () {
    try { localStorage.setItem(KEY, box.checked ? "1" : "0"); } catch (e) { /* ignore */ }
    apply();
  });
  apply();
})();
