// The report's behaviour, with nothing loaded from the network:
// - links to a part or section open it (and the parts around it) first;
// - every chart is drawn here as SVG from the page's one JSON blob
//   (#report-data: `columns` of numbers, each stored once, and `charts`,
//   whose `cols` map a chart's own column numbers to the page's);
// - hovering shows the nearest value, a legend entry hides or shows its
//   series, dragging across a line chart zooms to that range (double-click
//   or "reset zoom" goes back).
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
    const target = reveal(decodeURIComponent(a.getAttribute("href").slice(1)));
    if (target) {
      e.preventDefault();
      target.scrollIntoView();
      history.replaceState(null, "", a.getAttribute("href"));
    }
  });
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
  // On a narrow window the contents sit above the text: folded, one line
  // high, until opened; following a link folds them again.
  const narrow = window.matchMedia("(max-width: 800px)");
  const contents = document.querySelector("nav#contents details");
  if (narrow.matches) contents.open = false;
  contents.addEventListener("click", (e) => {
    if (narrow.matches && e.target.closest("a")) contents.open = false;
  });

  const data = JSON.parse(document.getElementById("report-data").textContent);
  const tip = document.getElementById("tip");
  const NS = "http://www.w3.org/2000/svg";
  // Drawing units; the SVG scales to the width of the column.
  const W = 900, M = { l: 70, r: 16, t: 12, b: 46 };

  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // Numbers as a reader wants them: no more than five significant digits.
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e9 || a < 1e-3)) return v.toExponential(3);
    return String(+v.toPrecision(5));
  }

  // Round steps (1, 2, 5 × 10^k) covering [lo, hi] with about n ticks.
  function ticks(lo, hi, n) {
    const raw = (hi - lo) / n || 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
    return out;
  }

  // Spreading long arrays into Math.min/max overflows the stack.
  const min = (xs, m = Infinity) => xs.reduce((a, v) => (v < a ? v : a), m);
  const max = (xs, m = -Infinity) => xs.reduce((a, v) => (v > a ? v : a), m);

  function scale(lo, hi, a, b, log) {
    if (log) {
      const [l0, l1] = [Math.log10(lo), Math.log10(hi)];
      return (v) => a + ((Math.log10(Math.max(v, lo)) - l0) / (l1 - l0 || 1)) * (b - a);
    }
    return (v) => a + ((v - lo) / (hi - lo || 1)) * (b - a);
  }

  function showTip(e, lines) {
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    const y = e.clientY + 14 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 8 : e.clientY + 14;
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.hidden = true; }

  // Axes and their labels. `xs` are [value, label] pairs at x positions.
  function axes(svg, c, H, xs, ys) {
    const g = el("g", { class: "axes" }, svg);
    el("line", { x1: M.l, y1: H - M.b, x2: W - M.r, y2: H - M.b }, g);
    el("line", { x1: M.l, y1: M.t, x2: M.l, y2: H - M.b }, g);
    for (const [x, label] of xs) {
      el("line", { x1: x, y1: H - M.b, x2: x, y2: H - M.b + 5 }, g);
      el("text", { x, y: H - M.b + 18, "text-anchor": "middle" }, g).textContent = label;
    }
    for (const [y, label] of ys) {
      el("line", { x1: M.l - 5, y1: y, x2: M.l, y2: y }, g);
      el("text", { x: M.l - 8, y: y + 4, "text-anchor": "end" }, g).textContent = label;
    }
    el("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", class: "label" }, g).textContent = c.x;
    el("text", { x: 14, y: (M.t + H - M.b) / 2, "text-anchor": "middle", class: "label",
      transform: `rotate(-90 14 ${(M.t + H - M.b) / 2})` }, g).textContent = c.y;
  }

  // Category labels, thinned so that they do not overlap.
  function categoryTicks(names, x0, step) {
    const every = Math.max(1, Math.ceil(names.length / Math.floor((W - M.l - M.r) / 70)));
    return names.map((n, i) => [x0 + (i + 0.5) * step, n.length > 14 ? n.slice(0, 13) + "…" : n])
      .filter((_, i) => i % every === 0);
  }

  // A mark remembers what hovering over it shows.
  function mark(name, attrs, parent, series, text) {
    const e = el(name, Object.assign({ class: "mark", "data-series": series }, attrs), parent);
    e.tipText = text;
    return e;
  }

  const draw = {
    // A flame graph: root at the bottom, each frame within its caller's span;
    // clicking a frame zooms to its span.
    flame(c, svg, state) {
      const [dc, sc, wc, nc] = c.frames.map((k) => c.col(k));
      const depth = max(dc, 0) + 1, FH = 18, H = M.t + M.b + FH * depth;
      const total = max(dc.map((d, i) => (d === 0 ? sc[i] + wc[i] : 0)), 1);
      const [x0, x1] = state.zoom || [0, total];
      const X = scale(x0, x1, M.l, W - M.r);
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      const g = el("g", { class: "axes" }, svg);
      el("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", class: "label" }, g).textContent = c.x;
      if (state.hidden.has(0)) return;
      const s = c.series[0];
      dc.forEach((d, i) => {
        const a = sc[i], b = sc[i] + wc[i];
        if (b <= x0 || a >= x1 || X(Math.min(b, x1)) - X(Math.max(a, x0)) < 0.5) return;
        const x = X(Math.max(a, x0)), w = X(Math.min(b, x1)) - x, y = H - M.b - FH * (d + 1);
        const name = c.names[nc[i]];
        const r = mark("rect", { x, y, width: Math.max(w - 0.5, 0.5), height: FH - 1, fill: s.color, "fill-opacity": 0.35 + 0.65 * ((nc[i] * 37) % 11) / 10 },
          svg, 0, [name, `${c.x}: ${fmt(wc[i])} (${fmt((100 * wc[i]) / total)} %)`]);
        r.onclick = () => { state.zoom = [a, b]; state.redraw(); };
        if (w > 40) {
          const t = el("text", { x: x + 3, y: y + 13, class: "flame-label" }, svg);
          t.textContent = name.length * 6.5 > w - 6 ? name.slice(0, Math.max(0, Math.floor((w - 6) / 6.5) - 1)) + "…" : name;
        }
      });
    },

    lines(c, svg, state) {
      const H = 330;
      const series = c.series.map((s, i) => {
        const y = c.col(s.y);
        const x = s.x === null ? y.map((_, k) => k) : c.col(s.x);
        return { s, i, x, y, r: s.r === undefined ? null : c.col(s.r) };
      });
      const shown = series.filter((d) => !state.hidden.has(d.i));
      const all = series.flatMap((d) => d.x);
      const [x0, x1] = state.zoom || (c.logx ? [min(all), max(all)] : [min(all, 0), max(all, 1)]);
      // The x at a horizontal position, in drawing units.
      const atX = (px) => {
        const f = (px - M.l) / (W - M.l - M.r);
        return c.logx ? x0 * Math.pow(x1 / x0, f) : x0 + f * (x1 - x0);
      };
      // y covers the points in view (all of them when nothing is zoomed).
      const ys = shown.flatMap((d) => d.y.filter((_, k) => d.x[k] >= x0 && d.x[k] <= x1));
      const pos = ys.filter((v) => v > 0);
      let y0 = c.log ? (pos.length ? min(pos) * 0.8 : 1) : min(ys, 0);
      let y1 = ys.length ? max(ys) * (c.log ? 1.5 : 1.06) : 1;
      if (y1 <= y0) y1 = y0 + 1;
      const X = scale(x0, x1, M.l, W - M.r, c.logx), Y = scale(y0, y1, H - M.b, M.t, c.log);
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      const decades = ticks(Math.floor(Math.log10(y0)), Math.ceil(Math.log10(y1)), 6).filter(Number.isInteger)
        .map((p) => Math.pow(10, p)).filter((v) => v >= y0 && v <= y1);
      // A logarithmic y within less than a decade gets round values instead.
      const ytick = c.log && decades.length >= 2 ? decades : ticks(y0, y1, c.log ? 4 : 6);
      // A logarithmic x is marked at the data's own x values (at most ten).
      const xs = [...new Set(all)].filter((v) => v >= x0 && v <= x1).sort((a, b) => a - b);
      const xtick = c.logx ? xs.filter((_, i) => i % Math.ceil(xs.length / 10) === 0) : ticks(x0, x1, 8);
      axes(svg, c, H, xtick.map((v) => [X(v), fmt(v)]), ytick.map((v) => [Y(v), fmt(v)]));
      el("clipPath", { id: `clip${c.n}` }, svg).appendChild(el("rect", { x: M.l, y: M.t - 6, width: W - M.l - M.r, height: H - M.b - M.t + 6 }));
      const g = el("g", { "clip-path": `url(#clip${c.n})` }, svg);
      for (const d of shown) {
        if (d.r) {
          d.x.forEach((x, k) => {
            if (x < x0 || x > x1) return;
            mark("circle", { cx: X(x), cy: Y(d.y[k]), r: Math.max(2, d.r[k]), fill: d.s.color }, g, d.i);
          });
        } else if (d.x.length === 1) {
          // A line of one point is a dot.
          mark("circle", { cx: X(d.x[0]), cy: Y(d.y[0]), r: 3, fill: d.s.color }, g, d.i);
        } else {
          const pts = d.x.map((x, k) => `${X(x).toFixed(1)},${Y(d.y[k]).toFixed(1)}`).join(" ");
          mark("polyline", { points: pts, fill: "none", stroke: d.s.color, "stroke-width": d.s.dash ? 1.2 : 2,
            "stroke-dasharray": d.s.dash ? "5 3" : "none" }, g, d.i);
        }
      }
      const focus = el("circle", { r: 5, class: "focus", visibility: "hidden" }, svg);
      // Hover: the point nearest the pointer, in drawing units, among the series shown.
      svg.onmousemove = (e) => {
        const p = svgPoint(svg, e);
        if (state.drag) return;
        let best = null;
        for (const d of shown) {
          for (let k = nearestIndex(d.x, atX(p.x)), j = k - 2; j <= k + 2; j++) {
            if (j < 0 || j >= d.x.length || d.x[j] < x0 || d.x[j] > x1) continue;
            const dist = Math.hypot(X(d.x[j]) - p.x, Y(d.y[j]) - p.y);
            if (!best || dist < best.dist) best = { dist, d, j };
          }
        }
        if (!best) return hideTip();
        const { d, j } = best;
        focus.setAttribute("cx", X(d.x[j]));
        focus.setAttribute("cy", Y(d.y[j]));
        focus.setAttribute("stroke", d.s.color);
        focus.setAttribute("visibility", "visible");
        showTip(e, [d.s.name, `${c.x}: ${fmt(d.x[j])}`, `${c.y}: ${fmt(d.y[j])}`]);
      };
      svg.onmouseleave = () => { focus.setAttribute("visibility", "hidden"); hideTip(); };
      zoomable(svg, state, H, (a, b) => [atX(a), atX(b)]);
    },

    bars(c, svg, state) {
      const H = 300;
      const shown = c.series.map((s, i) => ({ s, i, v: c.col(s.y) })).filter((d) => !state.hidden.has(d.i));
      const y1 = max(shown.flatMap((d) => d.v), 1e-9) * 1.08;
      const step = (W - M.l - M.r) / c.categories.length;
      const Y = scale(0, y1, H - M.b, M.t);
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      axes(svg, c, H, categoryTicks(c.categories, M.l, step), ticks(0, y1, 6).map((v) => [Y(v), fmt(v)]));
      const w = (step * 0.8) / Math.max(1, shown.length);
      shown.forEach((d, k) => d.v.forEach((v, i) => {
        if (!(v > 0)) return;
        mark("rect", { x: M.l + i * step + step * 0.1 + k * w, y: Y(v), width: w * 0.92, height: Y(0) - Y(v), fill: d.s.color },
          svg, d.i, [d.s.name, `${c.x}: ${c.categories[i]}`, `${c.y}: ${fmt(v)}`]);
      }));
    },

    stacked(c, svg, state) {
      const H = 300;
      const step = (W - M.l - M.r) / c.categories.length;
      // Shares of 100, or up to the tallest stack of the parts shown.
      const sums = c.groups.flatMap((_, gi) => c.categories.map((_, i) =>
        c.series.reduce((a, s, si) => a + (state.hidden.has(si) ? 0 : Math.max(0, c.col(s.y[gi])[i] || 0)), 0)));
      const y1 = c.percent ? 100 : max(sums, 1e-9) * 1.08;
      const unit = c.percent ? " %" : "";
      const Y = scale(0, y1, H - M.b, M.t);
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      axes(svg, c, H, categoryTicks(c.categories, M.l, step), ticks(0, y1, 5).map((v) => [Y(v), fmt(v)]));
      const w = (step * 0.84) / c.groups.length;
      c.groups.forEach((group, gi) => c.categories.forEach((cat, i) => {
        let base = 0;
        c.series.forEach((s, si) => {
          const v = c.col(s.y[gi])[i];
          if (state.hidden.has(si) || !(v > 0)) return;
          mark("rect", { x: M.l + i * step + step * 0.08 + gi * w, y: Y(base + v), width: w * 0.9, height: Y(base) - Y(base + v), fill: s.color },
            svg, si, [`${s.name}: ${fmt(v)}${unit}`, `${c.x}: ${cat}`, group]);
          base += v;
        });
      }));
    },

    extents(c, svg, state) {
      const rows = c.rows.map((r) => ({ name: r.name, a: c.col(r.a), b: c.col(r.b) }));
      const H = M.t + M.b + 28 * rows.length, L = 130;
      const xmax = max(rows.flatMap((r) => r.b), 1);
      const [x0, x1] = state.zoom || [0, xmax];
      const X = scale(x0, x1, L, W - M.r);
      svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
      const g = el("g", { class: "axes" }, svg);
      el("line", { x1: L, y1: H - M.b, x2: W - M.r, y2: H - M.b }, g);
      for (const v of ticks(x0, x1, 8)) {
        el("line", { x1: X(v), y1: H - M.b, x2: X(v), y2: H - M.b + 5 }, g);
        el("text", { x: X(v), y: H - M.b + 18, "text-anchor": "middle" }, g).textContent = fmt(v);
      }
      el("text", { x: (L + W - M.r) / 2, y: H - 6, "text-anchor": "middle", class: "label" }, g).textContent = c.x;
      el("clipPath", { id: `clip${c.n}` }, svg).appendChild(el("rect", { x: L, y: 0, width: W - L - M.r, height: H }));
      const blocks = el("g", { "clip-path": `url(#clip${c.n})` }, svg);
      const s = c.series[0];
      rows.forEach((r, i) => {
        const y = M.t + 28 * i;
        el("text", { x: L - 8, y: y + 17, "text-anchor": "end", class: "axes" }, svg).textContent = r.name;
        if (state.hidden.has(0)) return;
        r.a.forEach((a, k) => {
          const b = r.b[k];
          if (b < x0 || a > x1) return;
          // At least a pixel wide, so that a small block is seen.
          mark("rect", { x: X(a), y: y + 4, width: Math.max(X(b) - X(a), 1), height: 20, fill: s.color }, blocks, 0,
            [`${r.name}: ${s.name}`, `${c.x}: ${fmt(a)}–${fmt(b)}`, `size: ${fmt(b - a)}`]);
        });
      });
      zoomable(svg, state, H, (a, b) => [x0 + ((a - L) / (W - L - M.r)) * (x1 - x0), x0 + ((b - L) / (W - L - M.r)) * (x1 - x0)]);
    },
  };

  function svgPoint(svg, e) {
    const p = svg.createSVGPoint();
    p.x = e.clientX;
    p.y = e.clientY;
    return p.matrixTransform(svg.getScreenCTM().inverse());
  }

  // The index of the value nearest `v` in the ascending array `xs`.
  function nearestIndex(xs, v) {
    let lo = 0, hi = xs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (xs[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && Math.abs(xs[lo - 1] - v) <= Math.abs(xs[lo] - v) ? lo - 1 : lo;
  }

  // Drag across a chart to zoom to that range of x; `range` turns drawing
  // units into data.
  function zoomable(svg, state, H, range) {
    svg.classList.add("zoomable");
    svg.onmousedown = (e) => {
      const p = svgPoint(svg, e);
      state.drag = { from: p.x, band: el("rect", { class: "band", x: p.x, y: M.t, width: 0, height: H - M.t - M.b }, svg) };
      e.preventDefault();
    };
    svg.onmouseup = (e) => {
      const d = state.drag;
      if (!d) return;
      state.drag = null;
      const to = svgPoint(svg, e).x;
      d.band.remove();
      if (Math.abs(to - d.from) > 6) {
        state.zoom = range(Math.min(d.from, to), Math.max(d.from, to));
        state.redraw();
      }
    };
    svg.addEventListener("mousemove", (e) => {
      const d = state.drag;
      if (!d) return;
      const x = svgPoint(svg, e).x;
      d.band.setAttribute("x", Math.min(d.from, x));
      d.band.setAttribute("width", Math.abs(x - d.from));
    });
    svg.ondblclick = () => { state.zoom = null; state.redraw(); };
  }

  // Each chart: a legend of buttons above the plot (never on the data),
  // the SVG, and its state (hidden series, zoomed range).
  document.querySelectorAll("div.plot").forEach((div) => {
    const n = +div.dataset.chart;
    const c = Object.assign({ n, col: (k) => data.columns[data.charts[n].cols[k]] }, data.charts[n]);
    const legend = document.createElement("div");
    legend.className = "legend";
    const svg = el("svg", { class: "chart", role: "img" });
    const reset = document.createElement("button");
    reset.textContent = "reset zoom";
    reset.className = "reset";
    reset.hidden = true;
    const state = { hidden: new Set(), zoom: null, drag: null };
    state.redraw = () => {
      svg.replaceChildren();
      draw[c.kind](c, svg, state);
      reset.hidden = !state.zoom;
      legend.querySelectorAll("button.key").forEach((b, i) => b.setAttribute("aria-pressed", String(!state.hidden.has(i))));
    };
    reset.onclick = () => { state.zoom = null; state.redraw(); };
    c.series.forEach((s, i) => {
      const b = document.createElement("button");
      b.className = "key";
      b.innerHTML = `<span class="swatch${s.dash ? " dash" : ""}${s.r ? " dot" : ""}"></span>`;
      b.firstChild.style.setProperty("--c", s.color);
      b.append(s.name);
      b.title = "show or hide this series";
      b.onclick = () => {
        if (state.hidden.has(i)) state.hidden.delete(i); else state.hidden.add(i);
        state.redraw();
      };
      legend.appendChild(b);
    });
    legend.appendChild(reset);
    // Bars and blocks show what they are; lines find their nearest point.
    svg.addEventListener("mouseover", (e) => { if (e.target.tipText) showTip(e, e.target.tipText); });
    svg.addEventListener("mouseout", (e) => { if (e.target.tipText) hideTip(); });
    div.append(legend, svg);
    state.redraw();
  });
  // The number format, for checks that compare a hover with the data.
  window.retypeReport = { fmt };
})();
