// specdecode serve: the page's four figures. Plain JavaScript; every number and every fact the page shows comes
// from the server's API: the figures' results from their endpoints, the rest (legend, toy vocabulary, defaults,
// limits) from GET /api/page.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  let facts = null; // GET /api/page, before any figure starts

  // --- small helpers --------------------------------------------------------------------------------------------

  function svg(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function span(className, text, title) {
    const node = document.createElement("span");
    node.className = className;
    node.textContent = text;
    if (title) node.title = title;
    return node;
  }

  function hint(text) {
    return span("hint", text);
  }

  function partsFragment(parts) {
    const fragment = document.createDocumentFragment();
    for (const part of parts) fragment.append(span(`tok ${part.kind}`, part.text, facts.kinds[part.kind]));
    return fragment;
  }

  // The legend of a round's colours, in every element marked data-kinds.
  function legends() {
    for (const node of document.querySelectorAll(".legend[data-kinds]")) {
      node.replaceChildren();
      for (const entry of facts.legend) node.append(span(`tok ${entry.kind}`, entry.text), " ");
    }
  }

  // Text into every element of a class (a fact the page names in more than one place).
  function fill(className, text) {
    for (const node of document.getElementsByClassName(className)) node.textContent = text;
  }

  // An <input>'s limits and value from a request field's {default, minimum, maximum} (those it has).
  function bound(input, field) {
    if (field.minimum !== undefined) input.min = field.minimum;
    if (field.maximum !== undefined) input.max = field.maximum;
    if (field.default !== undefined && field.default !== null) input.value = field.default;
  }

  // "a", "a and b", "a, b and c"
  function andList(items) {
    return items.length < 2 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
  }

  const decimal = (v) => String(+v.toFixed(3));

  function showError(id, error) {
    const node = $(id);
    node.textContent = error ? (error.message || String(error)) : "";
    node.hidden = !error;
  }

  // fetch with the server's JSON error message ({"error": {"message": ...}}) as the thrown Error's message
  async function api(path, options) {
    let response;
    try {
      response = await fetch(path, options);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new Error(`cannot reach the server (${error.message})`);
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && body.error && body.error.message) message = body.error.message;
      } catch (_) { /* not JSON: keep the status line */ }
      throw new Error(message);
    }
    return response;
  }

  const getJSON = async (path) => (await api(path)).json();
  const post = (path, body, signal) => api(path, {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body), signal,
  });

  // Server-sent events from a fetch response: calls onEvent(name, data) per event.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, {stream: true}).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, data.join("\n"));
      }
    }
  }

  // The width in SVG units: the chart's own width in pixels (within limits), so text stays legible on a phone.
  function chartWidth(chart) {
    return Math.round(Math.max(340, Math.min(640, chart.clientWidth || 600)));
  }

  // Re-render a chart with its last data when the window is resized.
  function onResize(render) {
    let pending = false;
    window.addEventListener("resize", () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; render(); });
    });
  }

  function niceCeil(x) {
    if (!(x > 0)) return 1;
    const step = 10 ** Math.floor(Math.log10(x));
    for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * step >= x) return m * step;
    return 10 * step;
  }

  // --- Try it: draft, verify, repeat -----------------------------------------------------------------------------

  function roundFigure() {
    const START = facts.toy.start;
    const gamma = $("round-gamma"), runButton = $("round-run");
    const line = $("round-line"), summary = $("round-summary"), text = $("round-text"), counter = $("round-counter");
    let tokens, runs, produced, busy = false;

    function showCounter() {
      counter.textContent = `big-model runs: ${runs}, tokens produced: ${produced}` +
        (runs ? ` (${(produced / runs).toFixed(2)} tokens per run)` : "");
      counter.dataset.runs = runs;
      counter.dataset.produced = produced;
    }

    function reset() {
      tokens = START.tokens.slice();
      runs = 0;
      produced = 0;
      line.replaceChildren(hint("Press “Run one round”."));
      summary.textContent = "";
      text.textContent = START.text;
      showError("round-error", null);
      showCounter();
    }

    async function runOnce() {
      if (busy) return;
      busy = true;
      runButton.disabled = true;
      try {
        // The toy models are bigrams (only the last word matters), so the recent text is context enough.
        const response = await post("/api/toy/round", {tokens: tokens.slice(-256), gamma: Number(gamma.value)});
        const round = await response.json();
        runs += round.target_calls;
        produced += round.emitted;
        tokens = tokens.concat(round.emitted_tokens);
        line.replaceChildren(partsFragment(round.parts));
        const drafted = round.drafted.length;
        summary.textContent = round.kind === "bonus"
          ? `all ${drafted} drafts accepted, then a bonus token from the target`
          : `${round.n_accepted} of ${drafted} drafts accepted, the next one rejected, then a corrected token`;
        text.textContent += round.emitted_text;
        text.scrollTop = text.scrollHeight;
        showError("round-error", null);
        showCounter();
      } catch (error) {
        showError("round-error", error);
      } finally {
        busy = false;
        runButton.disabled = false;
      }
    }

    bound(gamma, facts.toy.gamma);
    $("round-gamma-value").textContent = gamma.value;
    fill("toy-size", facts.toy.words.length);
    fill("toy-agreement", Math.round(100 * facts.toy.agreement_at_least));
    gamma.addEventListener("input", () => { $("round-gamma-value").textContent = gamma.value; });
    runButton.addEventListener("click", runOnce);
    $("round-reset").addEventListener("click", reset);
    reset();
  }

  // --- Draws: the rule many times on the worked example -------------------------------------------------------

  function drawsFigure() {
    const chart = $("draws-chart"), button = $("draws-run");
    let last = null;
    fill("draws-n", facts.draws.n.toLocaleString("en"));

    // The worked example in words: p and q, which drafts are always kept, and what replaces a rejected one.
    function explain(data) {
      const quoted = (i) => `“${data.words[i]}”`;
      const all = data.words.map((_, i) => i);
      const sometimes = all.filter((i) => data.keep[i] < 1), always = all.filter((i) => data.keep[i] >= 1);
      const left = all.filter((i) => data.residual[i] > 0);
      const p = document.createElement("i"), q = document.createElement("i");
      p.textContent = "p";
      q.textContent = "q";
      const kept = sometimes.map((i) => `A drafted ${quoted(i)} is kept with probability ` +
        `${decimal(data.p[i])} / ${decimal(data.q[i])} = ${decimal(data.keep[i])}`);
      if (always.length) kept.push(`${andList(always.map(quoted))} ${always.length > 1 ? "are" : "is"} always kept`);
      const replaced = left.length === 1 ? quoted(left[0])
        : `(${left.map((i) => `${data.words[i]} ${decimal(data.residual[i])}`).join(", ")})`;
      const node = $("draws-example");
      node.replaceChildren(`The worked example: ${data.words.length} possible next words, target `, p.cloneNode(true),
        ` = (${data.words.map((w, i) => `${w} ${decimal(data.p[i])}`).join(", ")}), draft `, q.cloneNode(true),
        ` = (${data.q.map(decimal).join(", ")}). ${kept.join("; ")}`);
      if (sometimes.length) {
        node.append(`; a rejected ${andList(sometimes.map(quoted))} is replaced by a token drawn from norm(max(0, `,
          p, " − ", q, `)) = ${replaced}`);
      }
      node.append(".");
    }

    function render(data) {
      last = data;
      explain(data);
      const W = chartWidth(chart), left = 48, right = 62, barH = 20, gap = 4, groupGap = 18, top = 8;
      const plotW = W - left - right;
      const H = top + data.words.length * (2 * barH + gap + groupGap);
      const most = Math.max(...data.p, ...data.q, ...data.p.map((p) => p + 2 * Math.sqrt(p * (1 - p) / data.n)),
        ...data.frequencies);
      const scale = (v) => left + plotW * v / most;
      const root = svg("svg", {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "xMinYMin meet"});
      data.words.forEach((word, i) => {
        const y = top + i * (2 * barH + gap + groupGap);
        const p = data.p[i], f = data.frequencies[i];
        const se = Math.sqrt(p * (1 - p) / data.n);
        root.append(svg("text", {x: left - 8, y: y + barH + gap / 2 + 5, "text-anchor": "end", class: "label"}, word));
        root.append(svg("rect", {x: left, y, width: scale(p) - left, height: barH, class: "target-bar",
          "data-series": "target", "data-word": word, "data-value": p}));
        root.append(svg("text", {x: scale(p) + 6, y: y + barH - 5, class: "value"}, `p ${p.toFixed(3)}`));
        const y2 = y + barH + gap;
        root.append(svg("rect", {x: left, y: y2, width: Math.max(0, scale(f) - left), height: barH,
          class: "produced-bar", "data-series": "produced", "data-word": word, "data-value": f, "data-p": p,
          "data-se": se}));
        const lo = scale(Math.max(0, p - 2 * se)), hi = scale(p + 2 * se), mid = y2 + barH / 2;
        root.append(svg("line", {x1: lo, x2: hi, y1: mid, y2: mid, class: "whisker"}));
        root.append(svg("line", {x1: lo, x2: lo, y1: mid - 5, y2: mid + 5, class: "whisker"}));
        root.append(svg("line", {x1: hi, x2: hi, y1: mid - 5, y2: mid + 5, class: "whisker"}));
        root.append(svg("text", {x: Math.max(scale(f), hi) + 6, y: y2 + barH - 5, class: "value"}, f.toFixed(4)));
      });
      root.append(svg("line", {x1: left, x2: left, y1: 0, y2: H - groupGap + 4, class: "axis"}));
      chart.replaceChildren(root);
      const accepted = (100 * data.accepted / data.n).toFixed(1);
      $("draws-info").textContent = `seed ${data.seed}: ${data.accepted.toLocaleString("en")} of ` +
        `${data.n.toLocaleString("en")} drafts accepted (${accepted}%)`;
      chart.dataset.seed = data.seed;
    }

    async function run() {
      button.disabled = true;
      try {
        const seed = Math.floor(Math.random() * 2 ** 31);
        render(await getJSON(`/api/draws?n=${facts.draws.n}&seed=${seed}`));
        showError("draws-error", null);
      } catch (error) {
        showError("draws-error", error);
      } finally {
        button.disabled = false;
      }
    }

    button.addEventListener("click", run);
    onResize(() => { if (last) render(last); });
    run();
  }

  // --- Choosing gamma ------------------------------------------------------------------------------------------

  function gammaFigure() {
    const alpha = $("gamma-alpha"), c = $("gamma-c"), chart = $("gamma-chart"), best = $("gamma-best");
    const measured = $("gamma-measured");
    let latest = 0, last = null;

    function render(data) {
      last = data;
      const W = chartWidth(chart), H = Math.round(Math.min(300, W * 0.6)), left = 44, right = 14, top = 12;
      const bottom = 40;
      const plotW = W - left - right, plotH = H - top - bottom;
      const n = data.max_gamma;
      const ymax = niceCeil(Math.max(...data.points.map((p) => Math.max(p.speedup, p.extra_arithmetic,
        p.speedup_measured || 0))) * 1.05);
      const x = (g) => left + (n === 1 ? plotW / 2 : plotW * (g - 1) / (n - 1));
      const y = (v) => top + plotH * (1 - v / ymax);
      const root = svg("svg", {viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "xMidYMid meet"});
      const yStep = niceCeil(ymax / 5);
      for (let v = 0; v <= ymax + 1e-9; v += yStep) {
        root.append(svg("line", {x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid"}));
        root.append(svg("text", {x: left - 6, y: y(v) + 4, "text-anchor": "end"}, `${+v.toFixed(2)}×`));
      }
      if (ymax >= 1) root.append(svg("line", {x1: left, x2: W - right, y1: y(1), y2: y(1), class: "axis"}));
      for (let g = 1; g <= n; g++) {
        if (g === 1 || g % 5 === 0 || n <= 10) {
          root.append(svg("text", {x: x(g), y: H - bottom + 16, "text-anchor": "middle"}, g));
        }
      }
      root.append(svg("text", {x: left + plotW / 2, y: H - 6, "text-anchor": "middle"}, "γ (drafts per round)"));
      root.append(svg("line", {x1: left, x2: left, y1: top, y2: top + plotH, class: "axis"}));
      root.append(svg("line", {x1: left, x2: W - right, y1: top + plotH, y2: top + plotH, class: "axis"}));
      const path = (key) => data.points.map((p) => `${x(p.gamma).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
      root.append(svg("polyline", {points: path("extra_arithmetic"), class: "extra"}));
      root.append(svg("polyline", {points: path("speedup"), class: "speedup"}));
      const withMeasured = data.best_gamma_measured !== undefined;
      if (withMeasured) {
        root.append(svg("polyline", {points: path("speedup_measured"), class: "measured"}));
        root.append(svg("circle", {cx: x(data.best_gamma_measured), cy: y(data.best_speedup_measured), r: 5,
          class: "measured-dot"}));
      }
      const b = data.best_gamma;
      root.append(svg("line", {x1: x(b), x2: x(b), y1: top, y2: top + plotH, class: "best"}));
      root.append(svg("circle", {cx: x(b), cy: y(data.best_speedup), r: 5, class: "best-dot"}));
      const nearRight = x(b) > left + plotW * 0.7;
      root.append(svg("text", {x: x(b) + (nearRight ? -6 : 6), y: top + 14, "text-anchor": nearRight ? "end" : "start",
        class: "label"}, `best γ = ${b}`));
      chart.replaceChildren(root);

      best.textContent = b;
      best.dataset.key = `${data.alpha}|${data.c}`;
      const tokens = data.points[b - 1].expected_tokens;
      $("gamma-best-detail").textContent = `: ${data.best_speedup.toFixed(2)}× faster, ` +
        `${data.best_extra_arithmetic.toFixed(2)}× the arithmetic, ${tokens.toFixed(2)} tokens per target call`;
      $("gamma-measured-legend").hidden = !withMeasured;
      const costs = Object.entries(data.verify_ms || {}).map(([k, ms]) => `T(${k}) = ${ms.toFixed(1)} ms`);
      $("gamma-measured-detail").textContent = withMeasured ? `; with ${data.engine}'s measured verify cost ` +
        `(${costs.join(", ")}): best γ = ${data.best_gamma_measured}, ${data.best_speedup_measured.toFixed(2)}×` : "";
    }

    async function update() {
      $("gamma-alpha-value").textContent = Number(alpha.value).toFixed(2);
      $("gamma-c-value").textContent = Number(c.value).toFixed(2);
      const ticket = ++latest;
      try {
        const verify = measured.checked ? "&verify=measured" : "";
        const data = await getJSON(`/api/gamma?alpha=${alpha.value}&c=${c.value}${verify}`);
        if (ticket !== latest) return; // a newer slider position is on its way
        render(data);
        showError("gamma-error", null);
      } catch (error) {
        if (ticket === latest) showError("gamma-error", error);
      }
    }

    function set(a, cost) {
      alpha.value = Math.min(1, Math.max(0, a)).toFixed(2);
      c.value = Math.min(1, Math.max(0, cost)).toFixed(2);
      alpha.dispatchEvent(new Event("input", {bubbles: true}));
    }

    alpha.addEventListener("input", update);
    c.addEventListener("input", update);
    measured.addEventListener("change", update);
    onResize(() => { if (last) render(last); });
    for (const button of document.querySelectorAll("#gamma .presets button")) {
      button.addEventListener("click", () => set(Number(button.dataset.alpha), Number(button.dataset.c)));
    }
    update();
    return {set};
  }

  // --- Live ---------------------------------------------------------------------------------------------------------

  function liveFigure(gamma) {
    const form = $("live-form"), output = $("live-output"), runButton = $("live-run"), stop = $("live-stop");
    const use = $("live-use");
    let controller = null, measured = null;

    bound($("live-max"), facts.live.max_tokens);
    bound($("live-gamma"), facts.live.gamma);
    bound($("live-temperature"), facts.live.temperature);

    const fields = {alpha: $("live-alpha"), tpc: $("live-tpc"), tps: $("live-tps"), calls: $("live-calls"),
      c: $("live-c")};

    function showStats(stats) {
      const fixed = (v, digits) => (v === null || v === undefined ? "n/a" : v.toFixed(digits));
      fields.alpha.textContent = fixed(stats.alpha, 2);
      fields.tpc.textContent = fixed(stats.tokens_per_target_call, 2);
      fields.tps.textContent = fixed(stats.tokens_per_second, 1);
      fields.calls.textContent = stats.target_calls;
      fields.c.textContent = stats.draft_cost === null ? "0 (no draft model)" : fixed(stats.draft_cost, 3);
      $("live-stats").dataset.done = "true";
    }

    function clearStats() {
      for (const node of Object.values(fields)) node.textContent = "–";
      delete $("live-stats").dataset.done;
    }

    async function run() {
      if (controller) controller.abort();
      controller = new AbortController();
      const mine = controller;
      measured = null;
      use.disabled = true;
      runButton.disabled = true;
      stop.disabled = false;
      output.replaceChildren();
      $("live-pass").textContent = "";
      clearStats();
      showError("live-error", null);
      let rounds = 0;
      try {
        const response = await post("/api/live", {
          prompt: $("live-prompt").value, max_tokens: Number($("live-max").value),
          gamma: $("live-gamma").value === "" ? undefined : Number($("live-gamma").value), // empty: the default
          temperature: Number($("live-temperature").value),
        }, mine.signal);
        await readEvents(response, (name, data) => {
          const event = JSON.parse(data);
          if (name === "round") {
            const round = span(`round ${rounds % 2 ? "odd" : "even"}`, "");
            round.append(partsFragment(event.parts));
            const shared = event.pass;
            round.title = `verified in a target pass of ${shared.rows} rows for ${shared.requests} ` +
              `request${shared.requests === 1 ? "" : "s"} (${shared.yours} of them this one's)`;
            $("live-pass").textContent = shared.requests === 1
              ? `last target pass: ${shared.rows} rows, all this request's`
              : `last target pass: ${shared.rows} rows for ${shared.requests} requests, ${shared.yours} of them ` +
                "this one's (the others' rows were other clients' tokens, verified in the same pass)";
            output.append(round);
            output.scrollTop = output.scrollHeight;
            rounds += 1;
          } else if (name === "stats") {
            measured = event;
            $("live-models").textContent = `target ${event.target}, draft ${event.draft}`;
            showStats(event);
            use.disabled = false;
          } else if (name === "error") {
            showError("live-error", new Error(event.error ? event.error.message : "generation failed"));
          }
        });
      } catch (error) {
        if (error.name !== "AbortError") showError("live-error", error);
      } finally {
        if (controller === mine) {
          controller = null;
          runButton.disabled = false;
          stop.disabled = true;
        }
      }
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      run();
    });
    stop.addEventListener("click", () => { if (controller) controller.abort(); });
    use.addEventListener("click", () => {
      if (!measured) return;
      gamma.set(measured.alpha ?? 0, measured.draft_cost ?? 0);
      $("gamma").scrollIntoView({behavior: "smooth", block: "start"});
    });

    getJSON("/health").then((health) => {
      $("live-models").textContent = `target ${health.target}, ` +
        (health.draft === "default" ? "its default draft" : `draft ${health.draft}`);
      if (health.gamma === "auto") {
        $("live-gamma").value = "";
        $("live-gamma").placeholder = "auto";
      } else {
        $("live-gamma").value = health.gamma;
      }
      $("live-max").max = health.max_tokens;
      if (!$("live-prompt").value) $("live-prompt").value = facts.live.prompt;
      if (facts.live.words) $("live-prompt").placeholder = `words of: ${facts.live.words.join(" ")}`;
    }).catch((error) => showError("live-error", error));
  }

  document.addEventListener("DOMContentLoaded", async () => {
    try {
      facts = await getJSON("/api/page");
    } catch (error) {
      for (const id of ["round-error", "draws-error", "gamma-error", "live-error"]) showError(id, error);
      return;
    }
    legends();
    roundFigure();
    drawsFigure();
    const gamma = gammaFigure();
    liveFigure(gamma);
  });
})();
