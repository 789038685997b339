// SPDX-License-Identifier: Apache-2.0
// Opens tokentap-load's HTML reports (files) in headless Chromium, one
// after the other in one browser, and prints what each page holds as one
// JSON object {pages: [...]}: the panels, every chart's series and points,
// marks, limits, bars, the tables' cells, the requests the page made and
// its console errors; tests/e2e/test_load_report.py decides what is right.
//
//   node tests/e2e/report_check.mjs '<plan as JSON>'
//
// plan: pages ([{file, screenshot, width}]: a report's path, a PNG's path
// or null, the window's width or null), modules (a node_modules holding
// playwright-core), chromium, width (of every page without its own).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const plan = JSON.parse(process.argv[2]);
const require = createRequire(join(plan.modules, 'noop.js'));
const { chromium } = require('playwright-core');

const result = { pages: [] };
let out = null;
const profile = mkdtempSync(join(tmpdir(), 'tt-report-'));
let ctx;

async function main() {
	ctx = await chromium.launchPersistentContext(profile, {
		executablePath: plan.chromium || '/usr/bin/chromium',
		headless: true,
		viewport: { width: plan.width || 1280, height: 900 },
		args: ['--no-sandbox', '--headless', '--disable-gpu', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync',
			'--disable-dev-shm-usage'],
	});
	const page = ctx.pages()[0] || await ctx.newPage();
	page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') out.console.push(m.text()); });
	page.on('pageerror', e => out.console.push('pageerror: ' + e.message));
	page.on('request', r => out.requests.push(r.url()));
	for (const p of plan.pages) {
		out = { requests: [], console: [], file: p.file };
		await page.setViewportSize({ width: p.width || plan.width || 1280, height: 900 });
		result.pages.push(out);
		await read(page, p);
	}
}

async function read(page, p) {
	const url = pathToFileURL(p.file).href;
	await page.goto(url, { waitUntil: 'load' });
	out.url = url;
	out.title = await page.title();
	out.kind = await page.$eval('body', b => b.dataset.kind);
	out.scripts = await page.$$eval('script', s => s.length);
	out.h1 = await page.$eval('h1', e => e.textContent);
	out.model = await page.$eval('#meta [data-k="model"]', e => e.textContent);
	out.command = await page.$eval('#command', e => e.textContent);
	out.panels = await page.$$eval('section.panel', ss => ss.map(s => ({
		id: s.dataset.panel, charts: s.querySelectorAll('svg.chart').length,
		empty: [...s.querySelectorAll('.empty')].map(e => e.textContent),
		height: s.getBoundingClientRect().height,
	})));
	out.charts = await page.$$eval('svg.chart', cs => Object.fromEntries(cs.map(c => [c.id, {
		title: c.querySelector('title').textContent,
		series: Object.fromEntries([...c.querySelectorAll('g.series')].map(g => [g.dataset.series,
			[...g.querySelectorAll('circle')].map(p => ({ level: Number(p.dataset.level),
				x: Number(p.dataset.x), y: Number(p.dataset.y) }))])),
		paths: Object.fromEntries([...c.querySelectorAll('g.series')].map(g => [g.dataset.series,
			(g.querySelector('path') || { getAttribute: () => '' }).getAttribute('d')])),
		marks: [...c.querySelectorAll('g.mark')].map(m => ({ mark: m.dataset.mark,
			level: Number(m.dataset.level), value: Number(m.dataset.value) })),
		limits: [...c.querySelectorAll('g.limit')].map(l => ({ target: l.dataset.target,
			limit: Number(l.dataset.limit) })),
		// the labels drawn on the plot (each point's load, the marks'
		// names): their boxes on the screen, and each pair that intersects
		labels: [...c.querySelectorAll('text.load, g.mark text')].map(t => t.textContent),
		overlaps: (() => {
			const ts = [...c.querySelectorAll('text.load, g.mark text')];
			const bs = ts.map(t => t.getBoundingClientRect()), o = [];
			for (let i = 0; i < bs.length; i++)
				for (let j = i + 1; j < bs.length; j++) {
					const a = bs[i], b = bs[j];
					if (a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
					    a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
						o.push([ts[i].textContent, ts[j].textContent]);
				}
			return o;
		})(),
		// every drawn shape inside the SVG's box
		outside: [...c.querySelectorAll('circle, rect')].filter(e => {
			const b = e.getBBox(), v = c.viewBox.baseVal;
			return b.x < -1 || b.y < -1 || b.x + b.width > v.width + 1 || b.y + b.height > v.height + 1;
		}).length,
	}])));
	out.levels = await page.$$eval('#levels tbody tr', rs => rs.map(r => ({
		level: Number(r.dataset.level), key: r.dataset.key, value: Number(r.dataset.value),
		cls: r.className,
		cells: Object.fromEntries([...r.querySelectorAll('td[data-k]')].map(td =>
			[td.dataset.k, td.dataset.value === undefined ? td.textContent : Number(td.dataset.value)])),
	})));
	out.dists = await page.$$eval('#dists tbody tr', rs => Object.fromEntries(rs.map(r =>
		[r.dataset.metric, Object.fromEntries([...r.querySelectorAll('td[data-k]')].map(td =>
			[td.dataset.k, td.dataset.value === undefined ? null : Number(td.dataset.value)]))])));
	out.capacity = await page.$$eval('#p-verdict li.capacity', ls => ls.map(l => ({
		key: l.dataset.key, found: l.dataset.found === '1', value: Number(l.dataset.value),
		lo: Number(l.dataset.lo), hi: Number(l.dataset.hi), binding: l.dataset.binding })));
	out.verdict_text = await page.$eval('#p-verdict', v => v.textContent.replace(/\s+/g, ' '));
	out.sweep = await page.$$eval('#sweep', ls => ls.map(l => ({ knee: Number(l.dataset.knee),
		saturated: Number(l.dataset.saturated), stop: l.dataset.stop })));
	out.slo = await page.$$eval('#slo [data-target]', ts => ts.map(t => ({ target: t.dataset.target,
		limit: Number(t.dataset.limit) })));
	out.bars = await page.$$eval('#p-errors rect.bar', bs => bs.map(b => ({
		level: Number(b.dataset.level), outcome: b.dataset.outcome, count: Number(b.dataset.count),
		value: Number(b.dataset.value) })));
	out.error_labels = await page.$$eval('#p-errors text[data-level]', ts => ts.map(t => ({
		level: Number(t.dataset.level), rate: Number(t.dataset.errorRate) })));
	out.cdf = await page.$$eval('#p-itl_cdf g[data-q50]', gs => gs.map(g => ({
		level: Number(g.dataset.level), q50: Number(g.dataset.q50), q90: Number(g.dataset.q90),
		q99: Number(g.dataset.q99), points: (g.querySelector('path').getAttribute('d').match(/[ML]/g) || []).length })));
	out.scatter = await page.$$eval('#p-input g.scatter', gs => gs.map(g => ({
		points: Number(g.dataset.points), total: Number(g.dataset.total),
		drawn: g.querySelectorAll('circle').length })));
	out.fit = await page.$$eval('#p-input g.fit', gs => gs.map(g => ({ slope: Number(g.dataset.slope),
		intercept: Number(g.dataset.intercept), r2: Number(g.dataset.r2), n: Number(g.dataset.n) })));
	out.input_constant = await page.$$eval('#p-input [data-constant]', ns => ns.map(n => ({
		tokens: Number(n.dataset.constant), requests: Number(n.dataset.requests) })));
	out.input_charts = await page.$$eval('#p-input svg', ss => ss.length);
	out.timeline = await page.$$eval('#p-timeline g.tl', gs => gs.map(g => ({
		requests: Number(g.dataset.requests), shown: Number(g.dataset.shown), step: Number(g.dataset.step),
		rows: [...g.querySelectorAll('g[data-seq]')].map(r => ({ seq: Number(r.dataset.seq),
			start: Number(r.dataset.start), ttft: r.dataset.ttft === '' ? null : Number(r.dataset.ttft),
			e2e: Number(r.dataset.e2e), outcome: r.dataset.outcome, off: r.classList.contains('off'),
			bars: r.querySelectorAll('rect').length })) })));
	out.window = await page.$$eval('#p-timeline line[data-window]', ls => ls.map(l =>
		({ which: l.dataset.window, t: Number(l.dataset.t) })));
	out.tokentap = await page.$$eval('#tokentap tbody tr', rs => rs.map(r => Object.fromEntries(
		[...r.querySelectorAll('td[data-k]')].map(td => [td.dataset.k, Number(td.dataset.value)]))));
	out.scroll_width = await page.evaluate(() => document.documentElement.scrollWidth);
	if (p.screenshot)
		await page.screenshot({ path: p.screenshot, fullPage: true });
}

let code = 0;
try {
	await main();
} catch (e) {
	result.error = String(e && e.stack || e);
	code = 1;
} finally {
	if (ctx) await ctx.close().catch(() => {});
	rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(result) + '\n');
process.exitCode = code;
