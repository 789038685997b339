// SPDX-License-Identifier: Apache-2.0
// Drives the dashboard at GET /ui in headless Chromium and prints what it
// saw as one JSON object; tests/e2e/test_ui.py decides what is right.
//
//   node tests/e2e/ui_check.mjs '<plan as JSON>'
//
// plan: url, modules (a node_modules holding playwright-core), chromium,
// routes (cards to wait for), tokens (typed, in order, each time the page
// asks), firing ({alertname, severity, route} to wait for), range (to
// select), expand (route card to click), points (chart points to wait
// for), wait (selectors to wait for), pool ({route, state: {upstream:
// state}} a replica table to wait for), screenshot (paths), reload,
// mobile, dark (extra checks), phone_screenshot ([path, selector or
// null] pairs: a screen at a phone's size from the top or that section),
// slos (SLO rows to wait for), slo_firing ({slo, severity} of an
// SLOBurnRate to wait for, in the alerts and in its row), overlap (widths
// at which to look for figures that run into each other: as served, then
// with the widest values the board can show).
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const plan = JSON.parse(process.argv[2]);
const require = createRequire(join(plan.modules, 'noop.js'));
const { chromium } = require('playwright-core');

const WAIT = 15000;
const out = { prompts: [], requests: [], console: [], cards: {}, steps: [] };
const profile = mkdtempSync(join(tmpdir(), 'tt-chromium-'));
let ctx;

function step(name) {
	out.steps.push(name);       // where it stopped, when a wait times out
}

const card = r => `#cards .card[data-route="${r}"]`;

// The page may ask again as soon as a token is refused, too fast to see the
// dialog close: count its showModal() calls instead.
function countAsks() {
	const show = HTMLDialogElement.prototype.showModal;
	window.__asks = 0;
	HTMLDialogElement.prototype.showModal = function () {
		window.__asks++;
		return show.call(this);
	};
}

async function answerPrompts(page, tokens) {
	for (const [i, token] of tokens.entries()) {
		step('prompt ' + (i + 1));
		await page.waitForFunction(n => window.__asks >= n, i + 1, { timeout: WAIT });
		await page.waitForSelector('#login[open]', { timeout: WAIT });
		out.prompts.push(await page.textContent('#login-msg'));
		await page.fill('#token', token);
		await page.click('#login button[type=submit]');
	}
}

async function waitCards(page, routes) {
	step('cards');
	await page.waitForFunction(rs => rs.every(r => {
		const e = document.querySelector(`.card[data-route="${r}"] [data-k="ttft_p95"]`);
		return e && e.dataset.value !== undefined;
	}), routes, { timeout: WAIT });
}

// What a chart drew: points with a sample, the first and last one's time,
// its main line's values.
function chartsIn(root) {
	return Object.fromEntries([...root.querySelectorAll('figure[data-chart]')].map(f => {
		const cv = f.querySelector('canvas');
		return [f.dataset.chart, { points: Number(cv.dataset.points || 0),
			from: cv.dataset.from ? Number(cv.dataset.from) : null,
			to: cv.dataset.to ? Number(cv.dataset.to) : null,
			values: JSON.parse(cv.dataset.values || '[]'),
			title: f.querySelector('.title').textContent, drawn: cv.width > 0 }];
	}));
}

// Every figure of every card: raw value, text shown, colour class.
async function readCards(page) {
	return page.$$eval('.card', cards => Object.fromEntries(cards.map(c => {
		const figs = {};
		for (const e of c.querySelectorAll('[data-k]'))
			figs[e.dataset.k] = { value: e.dataset.value ?? null, text: e.textContent, cls: e.className };
		const charts = [...c.querySelectorAll('canvas')].map(cv => Number(cv.dataset.points || 0));
		const chart = Object.fromEntries([...c.querySelectorAll('figure[data-chart]')].map(f => {
			const cv = f.querySelector('canvas');
			return [f.dataset.chart, { points: Number(cv.dataset.points || 0),
				from: cv.dataset.from ? Number(cv.dataset.from) : null,
				to: cv.dataset.to ? Number(cv.dataset.to) : null,
				values: JSON.parse(cv.dataset.values || '[]'), drawn: cv.width > 0 }];
		}));
		const detail = {};
		for (const t of c.querySelectorAll('.detail table')) {
			detail[t.dataset.by] = [...t.querySelectorAll('tbody tr[data-key]')].map(tr => ({
				key: tr.dataset.key, cells: [...tr.cells].map(td => td.dataset.value ?? td.textContent),
			}));
		}
		const pool = c.querySelector('.pool');
		const replicas = [...c.querySelectorAll('.pool tbody tr')].map(tr => ({
			upstream: tr.dataset.upstream, state: tr.dataset.state,
			cells: [...tr.cells].map(td => td.textContent),
		}));
		return [c.dataset.route, { state: c.dataset.state, figs, charts, chart, detail, replicas,
			folded: !!c.closest('#idle'),
			pool_shown: pool ? !pool.hidden : false,
			pool_title: pool ? pool.querySelector('.pool-n').textContent : '',
			expanded: c.getAttribute('aria-expanded') === 'true' }];
	})));
}

// Every figure list (the board's top, each card's): the boxes of each
// figure's text, one per line; what of one figure meets another's, and
// what runs out of its own column. Numbers that run into each other are
// read wrong.
function overlaps() {
	const textRects = root => {
		const out = [];
		const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
		for (let n = w.nextNode(); n; n = w.nextNode()) {
			if (!n.textContent.trim()) continue;
			const r = document.createRange();
			r.selectNodeContents(n);
			for (const q of r.getClientRects())
				if (q.width > 0 && q.height > 0)
					out.push({ x0: q.left, x1: q.right, y0: q.top, y1: q.bottom, text: n.textContent });
		}
		return out;
	};
	const meet = (a, b) => a.x0 < b.x1 - 0.5 && b.x0 < a.x1 - 0.5 && a.y0 < b.y1 - 0.5 && b.y0 < a.y1 - 0.5;
	const res = { lists: 0, figures: 0, meet: [], out: [], texts: [] };
	for (const dl of document.querySelectorAll('dl.figs')) {
		if (!dl.getClientRects().length) continue;      // folded
		res.lists++;
		const figs = [...dl.children].filter(d => d.getClientRects().length).map(d => ({
			name: d.querySelector('dt').textContent, cell: d.getBoundingClientRect(), rects: textRects(d) }));
		res.figures += figs.length;
		if (dl.id === 'inst') res.texts = figs.map(f => f.rects.map(r => r.text).join(''));
		for (const [i, f] of figs.entries()) {
			for (const r of f.rects)
				if (r.x1 > f.cell.right + 0.5 || r.x0 < f.cell.left - 3.5)
					res.out.push(f.name + ': ' + r.text);
			for (const g of figs.slice(i + 1))
				if (f.rects.some(a => g.rects.some(b => meet(a, b))))
					res.meet.push(f.name + ' / ' + g.name);
		}
	}
	return res;
}

// The widest figures the board can show, in the top's figures (the next
// poll puts the real ones back).
function widest() {
	const g = { requests: 123456, errors: 123456, error_rate: 1, active: 12345, max_active: 12345,
		ttft_ms: { p50: 99999, p95: 99999, p99: 99999 }, tpot_ms: { p50: 9999, p95: 9999 },
		trend: { ttft_p95: 12.34, tpot_p50: -0.99 }, output_tokens_per_s: 99999,
		output_tokens: 99999 * (S.cover ? S.cover.ms / 1000 : 3600), ttft_concurrency_r2: 0.9999 };
	fillFigs(document.querySelector('#inst'), g, {});
}

async function main() {
	ctx = await chromium.launchPersistentContext(profile, {
		executablePath: plan.chromium || '/usr/bin/chromium',
		headless: true,
		viewport: { width: 1280, height: 900 },
		args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync',
			'--disable-dev-shm-usage'],    // containers give /dev/shm 64 MiB
	});
	const page = ctx.pages()[0] || await ctx.newPage();
	await page.addInitScript(countAsks);
	page.on('console', m => { if (m.type() === 'error') out.console.push(m.text()); });
	page.on('pageerror', e => out.console.push('pageerror: ' + e.message));
	page.on('request', r => out.requests.push({
		url: r.url(), method: r.method(), auth: r.headers().authorization || null, t: Date.now(),
	}));

	step('load');
	await page.goto(plan.url, { waitUntil: 'load' });
	await answerPrompts(page, plan.tokens || []);
	await waitCards(page, plan.routes);
	out.asks = await page.evaluate(() => window.__asks);
	if (plan.firing) {
		step('firing');
		const f = plan.firing;
		await page.waitForSelector(`#firing li[data-state="firing"][data-alertname="${f.alertname}"]`
			+ `[data-severity="${f.severity}"][data-route="${f.route}"]`, { timeout: WAIT });
	}
	if (plan.slos) {
		step('slos');
		await page.waitForFunction(ns => ns.every(n =>
			document.querySelector(`#slos tr[data-slo="${n}"] [data-k="attainment"]`)),
			plan.slos, { timeout: WAIT });
	}
	if (plan.slo_firing) {
		step('slo firing');
		const f = plan.slo_firing;
		await page.waitForSelector(`#firing li[data-state="firing"][data-alertname="SLOBurnRate"]`
			+ `[data-slo="${f.slo}"][data-severity="${f.severity}"]`, { timeout: WAIT });
		await page.waitForSelector(`#slos tr[data-slo="${f.slo}"] .burn[data-state="firing"]`,
			{ timeout: WAIT });
	}
	for (const sel of plan.wait || []) {
		step('wait ' + sel);
		await page.waitForSelector(sel, { timeout: WAIT });
	}
	if (plan.range) {
		step('range');
		await page.selectOption('#range', plan.range);
		await page.waitForFunction(w => document.querySelector('#cards').dataset.range === w
			&& document.querySelector('#inst').dataset.range === w, plan.range, { timeout: WAIT });
	}
	if (plan.points) {
		step('chart points');
		await page.waitForFunction(([rs, n]) => rs.every(r => {
			const cv = document.querySelector(`.card[data-route="${r}"] canvas`);
			return cv && Number(cv.dataset.points) >= n;
		}), [plan.routes, plan.points], { timeout: WAIT });
	}
	if (plan.pool) {
		step('pool');
		await page.waitForFunction(({ route, state }) => Object.entries(state).every(([u, s]) =>
			document.querySelector(`#cards .card[data-route="${route}"] .pool tbody `
				+ `tr[data-upstream="${u}"][data-state="${s}"]`)), plan.pool, { timeout: WAIT });
	}
	if (plan.expand) {
		step('expand');
		await page.click(card(plan.expand) + ' > header');
		await page.waitForSelector(card(plan.expand) + ' table[data-by="model"] tbody tr[data-key]',
			{ timeout: WAIT });
	}
	out.opened = await page.evaluate(() => performance.timeOrigin);
	out.cards = await readCards(page);
	out.order = await page.$$eval('#cards > .card', cs => cs.map(c => c.dataset.route));
	out.idle = await page.$eval('#idle', e => ({ hidden: e.hidden, routes: e.dataset.routes || '',
		text: e.querySelector('summary').textContent }));
	out.board = await page.$eval('#board', b => {
		const figs = {};
		for (const e of b.querySelectorAll('#inst [data-k]'))
			figs[e.dataset.k] = { value: e.dataset.value ?? null, text: e.textContent, cls: e.className,
				tokens: e.dataset.tokens ?? null, ms: e.dataset.ms ?? null };
		return { figs, range: b.querySelector('#inst').dataset.range,
			young: b.querySelector('#inst').dataset.young === '1',
			note: b.querySelector('#board-note').textContent };
	});
	out.board.charts = await page.$eval('#board', chartsIn);
	out.window = await page.$eval('#cards', e => e.dataset.window);
	out.range = await page.$eval('#cards', e => e.dataset.range);
	out.windows = await page.$$eval('#range option', os => os.map(o => o.value));
	out.firing = await page.$$eval('#firing li', ls => ls.map(l => ({
		alertname: l.dataset.alertname, severity: l.dataset.severity, route: l.dataset.route,
		state: l.dataset.state, since: l.querySelector('.since').dataset.since, text: l.textContent,
	})));
	out.transitions = await page.$$eval('#transitions tbody tr', rs => rs.map(r => r.textContent));
	out.slos = await page.$$eval('#slos tbody tr', rs => Object.fromEntries(rs.map(r => {
		const cells = {};
		for (const c of r.querySelectorAll('td[data-k]'))
			cells[c.dataset.k] = { value: c.dataset.value ?? null, text: c.textContent, cls: c.className };
		const burns = [...r.querySelectorAll('.burn')].map(b => ({ state: b.dataset.state,
			severity: b.dataset.severity, long_window: b.dataset.longWindow, value: b.dataset.value,
			text: b.textContent }));
		return [r.dataset.slo, { state: r.dataset.state, cells, burns }];
	})));
	out.slo_hidden = await page.$eval('#slo-section', e => e.hidden);
	out.notes = await page.evaluate(() => ({ board: document.querySelector('#board-note').textContent,
		routes: document.querySelector('#window-note').textContent,
		slos: document.querySelector('#slo-note').textContent }));
	out.storage = await page.evaluate(() => ({
		token: sessionStorage.getItem('tokentap.token'), local: localStorage.length,
	}));
	out.page_url = page.url();
	for (const path of plan.screenshot || []) {
		step('screenshot');
		await page.screenshot({ path, fullPage: true });
	}
	if (plan.dark) {
		step('dark');
		const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
		await page.emulateMedia({ colorScheme: 'light' });
		out.light_bg = await bg();
		await page.emulateMedia({ colorScheme: 'dark' });
		out.dark_bg = await bg();
		await page.emulateMedia({ colorScheme: 'light' });
	}
	if (plan.mobile) {
		step('mobile');
		await page.setViewportSize({ width: 390, height: 844 });
		await page.waitForTimeout(100);
		out.mobile = await page.evaluate(() => ({
			scroll_width: document.documentElement.scrollWidth, width: window.innerWidth,
			card_width: document.querySelector('#cards .card').getBoundingClientRect().width,
			// the SLO table whole: no cell past the screen, nothing to scroll
			slo_right: Math.max(0, ...[...document.querySelectorAll('#slos td')]
				.map(td => td.getBoundingClientRect().right)),
			slo_scroll: document.querySelector('#slos').scrollWidth,
			slo_cells: document.querySelectorAll('#slos td').length,
			// what sticks out, if anything (scrolling boxes may be wider)
			wide: [...document.querySelectorAll('body *')].filter(e => !e.closest('.scroll')
				&& e.getBoundingClientRect().right > window.innerWidth + 0.5)
				.slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + e.textContent.slice(0, 40)),
		}));
		for (const [path, at] of plan.phone_screenshot || []) {
			step('phone screenshot');
			// a screen's worth, from the top or from a section
			await page.evaluate(sel => (sel ? document.querySelector(sel).scrollIntoView()
				: window.scrollTo(0, 0)), at || null);
			await page.screenshot({ path });
		}
		await page.evaluate(() => window.scrollTo(0, 0));
		await page.setViewportSize({ width: 1280, height: 900 });
	}
	if (plan.overlap) {
		// as served at each width, then the widest (a poll puts the real
		// figures back only later)
		const frame = () => page.evaluate(() => new Promise(r =>
			requestAnimationFrame(() => requestAnimationFrame(r))));
		out.overlap = [];
		for (const width of plan.overlap) {
			step('overlap ' + width);
			await page.setViewportSize({ width, height: 900 });
			await frame();
			out.overlap.push({ width, served: await page.evaluate(overlaps) });
		}
		for (const o of out.overlap) {
			step('overlap widest ' + o.width);
			await page.setViewportSize({ width: o.width, height: 900 });
			await frame();
			o.widest = await page.evaluate(`(${widest})(); (${overlaps})()`);
		}
		await page.setViewportSize({ width: 1280, height: 900 });
	}
	if (plan.reload) {
		step('reload');
		await page.reload({ waitUntil: 'load' });
		await waitCards(page, plan.routes);
		out.prompted_after_reload = await page.evaluate(() => window.__asks > 0);
	}
	step('done');
}

let code = 0;
try {
	await main();
} catch (e) {
	out.error = String(e && e.stack || e);
	code = 1;
} finally {
	if (ctx) await ctx.close().catch(() => {});
	rmSync(profile, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exitCode = code;
