// SPDX-License-Identifier: Apache-2.0
// Opens a WebSocket in headless Chromium, sends each message, waits for
// each answer, closes, and prints what it got as JSON; test_websocket.py
// decides what is right. A browser is the client tokentap did not write.
//
//   node tests/e2e/ws_check.mjs '{"url":..., "modules":..., "chromium":..., "send":[...]}'
import { createRequire } from 'node:module';
import { join } from 'node:path';

const plan = JSON.parse(process.argv[2]);
const require = createRequire(join(plan.modules, 'noop.js'));
const { chromium } = require('playwright-core');

const browser = await chromium.launch({ executablePath: plan.chromium, headless: true,
	args: ['--no-sandbox', '--headless', '--disable-gpu', '--no-first-run',
		'--disable-background-networking', '--disable-component-update',
		'--disable-dev-shm-usage'] });
try {
	const page = await browser.newPage();
	const out = await page.evaluate(async ({ url, send }) => {
		const got = [];
		const ws = new WebSocket(url);
		const next = () => new Promise((ok, fail) => {
			ws.onmessage = e => ok(e.data);
			ws.onerror = () => fail(new Error('error event'));
			ws.onclose = e => fail(new Error('closed ' + e.code));
		});
		const first = next();
		await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = fail; });
		got.push(await first);
		for (const m of send) {
			const p = next();
			ws.send(m);
			got.push(await p);
		}
		const closed = new Promise(ok => { ws.onclose = e => ok(e.code); });
		ws.close(1000);
		return { got, code: await closed, protocol: ws.protocol, extensions: ws.extensions };
	}, plan);
	console.log(JSON.stringify(out));
} finally {
	await browser.close();
}
