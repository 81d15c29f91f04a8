// nfvperf site: filter the runs table of index.html in the page (no server, works from file://).
// The filters can be preset from the address: index.html#suite=quick&dut=ovs-dpdk
(function () {
  "use strict";
  var form = document.getElementById("filters");
  var table = document.getElementById("runs");
  if (!form || !table) { return; }
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  var shown = document.getElementById("shown");
  var keys = ["suite", "where", "dut", "status"];

  function apply() {
    var want = {};
    keys.forEach(function (k) { want[k] = form.elements[k].value; });
    var from = form.elements.from.value, to = form.elements.to.value, n = 0;
    rows.forEach(function (tr) {
      var ok = keys.every(function (k) { return !want[k] || tr.dataset[k] === want[k]; });
      var d = tr.dataset.date;
      ok = ok && (!from || d >= from) && (!to || d <= to);
      tr.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + rows.length + " runs shown";
  }

  function preset() {
    var h = window.location.hash.replace(/^#/, "");
    if (!h) { return; }
    h.split("&").forEach(function (kv) {
      var p = kv.split("="), el = form.elements[decodeURIComponent(p[0])];
      if (el && p.length === 2) { el.value = decodeURIComponent(p[1]); }
    });
  }

  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { window.setTimeout(apply, 0); });
  preset();
  apply();
}());
