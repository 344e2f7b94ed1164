// Live updates for a session page served by `eventlog serve`: new events arrive over
// Server-Sent Events; the page re-fetches its own body (timeline, calls, integrity) from the
// same server. An exported file has no live URL and runs none of this.
(function () {
  "use strict";
  var body = document.body;
  var liveUrl = body.dataset.liveUrl;
  if (!liveUrl || typeof EventSource === "undefined") { return; }
  var fragmentUrl = body.dataset.fragmentUrl;
  var status = document.getElementById("live-status");
  var log = document.getElementById("live-log");
  var pending = null;
  var source = new EventSource(liveUrl);

  function refresh() {
    pending = null;
    fetch(fragmentUrl, { headers: { "Accept": "text/html" } })
      .then(function (reply) { return reply.ok ? reply.text() : Promise.reject(reply.status); })
      .then(function (html) {
        document.getElementById("live").innerHTML = html;
        body.dataset.refreshed = String(Number(body.dataset.refreshed || 0) + 1);
      })
      .catch(function (why) { status.textContent = "refresh failed: " + why; });
  }

  source.addEventListener("open", function () { status.textContent = "live"; });
  source.addEventListener("error", function () { status.textContent = "reconnecting…"; });
  source.addEventListener("end", function (message) {  // the server cannot follow the log
    source.close();
    status.textContent = "stopped: " + JSON.parse(message.data).reason;
  });
  source.addEventListener("append", function (message) {
    var event = JSON.parse(message.data);
    var item = document.createElement("li");
    item.dataset.seq = String(event.seq);
    item.textContent = event.seq + "  " + event.type + "  " + event.summary;
    log.appendChild(item);
    body.dataset.lastSeq = String(event.seq);
    if (pending === null) { pending = setTimeout(refresh, 150); }  // one refresh per burst
  });
})();
