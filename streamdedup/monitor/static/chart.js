// A tiny line-and-bar chart on a canvas, written for this page (no library, no CDN).
// draw(canvas, points, {line: key, bars: key, barMax: number, barLabel: text}): points are
// objects with t, one a second.
(function () {
  "use strict";
  function draw(canvas, points, opts) {
    // Drawn at the size it is shown (a fixed 900 px canvas squeezed into a phone's width made
    // its labels unreadable), sharp on dense screens.
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
    if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
    if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
    const ctx = canvas.getContext("2d"), pad = 28;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px sans-serif";
    ctx.strokeStyle = "#ccd";
    ctx.beginPath(); ctx.moveTo(pad, h - pad); ctx.lineTo(w - 4, h - pad); ctx.stroke();
    if (!points.length) { ctx.fillStyle = "#889"; ctx.fillText("no verdicts yet", pad + 8, h / 2); return; }
    // One slot per second, the last one's bar inside the frame (it was drawn past the edge).
    const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
    const slot = (w - pad - 8) / (t1 - t0 + 1);
    const x = (t) => pad + slot * (t - t0);
    const lineMax = Math.max(1, ...points.map((p) => p[opts.line]));
    const barW = Math.max(1, slot - 1);
    ctx.fillStyle = "rgba(217, 83, 79, 0.35)";
    for (const p of points) {
      const v = p[opts.bars] / (opts.barMax || 1);
      const bh = (h - 2 * pad) * Math.min(1, v);
      ctx.fillRect(x(p.t), h - pad - bh, barW, bh);
    }
    ctx.strokeStyle = "#2a6fdb"; ctx.lineWidth = 2; ctx.beginPath();
    points.forEach((p, i) => {
      const y = h - pad - (h - 2 * pad) * p[opts.line] / lineMax;
      if (i) ctx.lineTo(x(p.t) + slot / 2, y); else ctx.moveTo(x(p.t) + slot / 2, y);
    });
    ctx.stroke();
    ctx.fillStyle = "#445";
    ctx.fillText(String(lineMax) + "/s", 2, pad - 6);
    if (opts.barLabel) {  // the bars' scale: their full height
      ctx.fillStyle = "rgb(190, 70, 66)";
      ctx.fillText(opts.barLabel, w - 8 - ctx.measureText(opts.barLabel).width, pad - 6);
      ctx.fillStyle = "#445";
    }
    ctx.fillText(new Date(t0 * 1000).toLocaleTimeString(), pad, h - 8);
    const end = new Date(t1 * 1000).toLocaleTimeString();
    ctx.fillText(end, w - 8 - ctx.measureText(end).width, h - 8);
  }
  window.SdChart = { draw: draw };
})();
