// Drives headless Chromium (playwright-core) over the flame graphs that
// test_flamegraph --write made: frames and labels, hover details, click to
// zoom and reset, search, differential colors, nasty names kept inert.
// usage: node flamegraph_browser.js PLAYWRIGHT_CORE_DIR SVG_DIR
'use strict';
const path = require('path');
const { chromium } = require(path.resolve(process.argv[2]));
const dir = path.resolve(process.argv[3]);

let failed = 0;
function check(ok, what) {
	console.log((ok ? 'ok: ' : 'FAIL: ') + what);
	if (!ok) failed++;
}

// The <g> of the frame labelled exactly name (its rect and text).
function frame(page, name) {
	return page.locator('#frames > g', { has: page.locator('text', { hasText: new RegExp('^' + name + '$') }) });
}
async function rectWidth(g) {
	return parseFloat(await g.locator('rect').getAttribute('width'));
}
async function fillOf(g) {
	const f = await g.locator('rect').evaluate((r) => getComputedStyle(r).fill);
	return f.match(/\d+/g).map(Number);
}
async function open(browser, file) {
	const page = await browser.newPage({ viewport: { width: 1280, height: 400 } });
	const errors = [];
	page.on('pageerror', (e) => errors.push(String(e)));
	await page.goto('file://' + path.join(dir, file));
	const doc = await page.evaluate(() => ({
		root: document.documentElement.localName,
		parsererror: document.getElementsByTagName('parsererror').length,
		api: typeof window.tpflame,
	}));
	check(doc.root === 'svg' && doc.parsererror === 0, file + ': parsed as an SVG document');
	check(doc.api === 'object', file + ': the script ran');
	return { page, errors };
}

(async () => {
	// Chromium's sandbox needs user namespaces it cannot have as root.
	const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
	const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args });
	try {
		const { page, errors } = await open(browser, 'profile.svg');
		await page.screenshot({ path: path.join(dir, 'profile.png') });
		const labels = await page.locator('#frames text').allTextContents();
		for (const f of ['all', 'main', 'handleRequest', 'validateSignature', 'rsaVerify', 'parseJSON'])
			check(labels.includes(f), 'frame labelled ' + f);
		check(!labels.includes('sys_write'), 'sys_write too narrow for its label before zoom');

		await frame(page, 'validateSignature').locator('rect').hover();
		const details = await page.locator('#details').textContent();
		check(details === 'validateSignature in checkout: 4.20 s, 84.00% of all, 87.50% of parent',
			'hover details: ' + details);

		await frame(page, 'parseJSON').locator('rect').click();
		const pw = await rectWidth(frame(page, 'parseJSON'));
		const box = await frame(page, 'parseJSON').locator('rect').boundingBox();
		check(pw === 1180 && Math.abs(box.width - 1180) < 1, 'zoomed frame full width: ' + pw);
		check(!(await frame(page, 'validateSignature').isVisible()), 'sibling hidden after zoom');
		const mainClass = await frame(page, 'main').getAttribute('class');
		check(/dim/.test(mainClass || '') && (await rectWidth(frame(page, 'main'))) === 1180,
			'ancestor full width and dimmed');
		check(await frame(page, 'sys_write').isVisible(), 'child of the zoomed frame now labelled');
		check(await page.locator('#reset').isVisible(), 'Reset zoom shown');
		await page.screenshot({ path: path.join(dir, 'profile-zoom.png') });
		await page.locator('#reset').click();
		check(Math.abs((await rectWidth(frame(page, 'parseJSON'))) - 141.6) < 0.01 &&
			(await frame(page, 'validateSignature').isVisible()), 'reset zoom restores the graph');

		page.once('dialog', (d) => d.accept('^(rsaVerify|parseJSON)$'));
		await page.locator('#search').click();
		const hits = await page.locator('#frames rect[fill="#e600e6"]').count();
		const matched = await page.locator('#matched').textContent();
		check(hits === 2 && matched === 'Matched: 92.00% (2 frames)', 'search: ' + hits + ', ' + matched);
		await page.screenshot({ path: path.join(dir, 'profile-search.png') });
		await page.locator('#search').click(); // Reset search
		page.once('dialog', (d) => d.accept('Signature'));
		await page.keyboard.press('Control+f');
		check((await page.locator('#matched').textContent()) === 'Matched: 84.00% (1 frame)',
			'Ctrl-F searches too');

		// The nasty names: present, inert, shown as they are.
		const nasty = ']]></script><script>window.PWNED=1</script><![CDATA[';
		const idx = await page.evaluate((n) => { for (let i = 0; i < D.length / 6; i++) if (S[D[i * 6 + 1]] === n) return i; return -1; }, nasty);
		check(idx > 0, 'nasty name is a frame');
		check(await page.evaluate(() => window.PWNED === undefined), 'no script injected by a name');
		if (idx > 0) {
			await page.locator('#frames > g').nth(idx).locator('rect').hover();
			const t = await page.locator('#details').textContent();
			check(t.startsWith(nasty + ': 20.0 ms'), 'nasty name shown verbatim: ' + t);
		}
		check(errors.length === 0, 'no script errors: ' + errors.join('; '));

		const d = await open(browser, 'diff.svg');
		await d.page.screenshot({ path: path.join(dir, 'diff.png') });
		const red = await fillOf(frame(d.page, 'validateSignature'));
		const blue = await fillOf(frame(d.page, 'parseJSON'));
		check(red[0] === 255 && red[2] < 100, 'hotter in A is red: ' + red);
		check(blue[2] === 255 && blue[0] < 100, 'hotter in B is blue: ' + blue);
		await frame(d.page, 'validateSignature').locator('rect').hover();
		const dd = await d.page.locator('#details').textContent();
		check(dd === 'validateSignature in checkout: duration > 1s 80.00% (800 samples), ' +
			'duration < 100ms 10.00% (1000 samples), delta +70.00 points', 'diff details: ' + dd);
		check(d.errors.length === 0, 'no script errors in diff: ' + d.errors.join('; '));

		// off-CPU time (parseJSON) next to CPU time: blue, weighed in time
		const o = await open(browser, 'offcpu.svg');
		await o.page.screenshot({ path: path.join(dir, 'offcpu.png') });
		const off = await fillOf(frame(o.page, 'parseJSON'));
		const warm = await fillOf(frame(o.page, 'handleRequest'));
		check(off[2] > off[0] + 80, 'the off-CPU frame is blue: ' + off);
		check(warm[0] > warm[2] + 80, 'a frame with CPU time stays warm: ' + warm);
		check(await frame(o.page, 'parseJSON').getAttribute('class') === 'off', 'class off');
		await frame(o.page, 'parseJSON').locator('rect').hover();
		const od = await o.page.locator('#details').textContent();
		check(od.startsWith('parseJSON in checkout: 400 ') && od.includes('40.00% of all'),
			'off-CPU details: ' + od);
		await frame(o.page, 'handleRequest').locator('rect').hover();
		const hd = await o.page.locator('#details').textContent();
		check(hd.startsWith('handleRequest in checkout: 1.0 ms'), 'CPU details: ' + hd);
		check(o.errors.length === 0, 'no script errors in offcpu: ' + o.errors.join('; '));
	} finally {
		await browser.close();
	}
	console.log(failed ? failed + ' failed' : 'all passed');
	process.exit(failed ? 1 : 0);
})().catch((e) => {
	console.error('FAIL: ' + (e && e.stack ? e.stack : e));
	process.exit(1);
});
