// The flame graph's inline script (lib/render/flamegraph.js) run by node
// without a browser: test_flamegraph --write makes profile.svg and
// diff.svg in OUT_DIR; each document's frames become a small stand-in
// DOM, its <script> runs on them, and hover, zoom, reset, search (nested
// matches counted once, text when the term is no regular expression),
// Ctrl-F and Escape are checked against the data tables. The source file
// must pass `node --check` and hold nothing that ends a CDATA section.
// The flamegraph_browser test does the same in Chromium.
// usage: node flamegraph_script.js FLAMEGRAPH_JS TEST_FLAMEGRAPH OUT_DIR
'use strict';
const assert = require('assert');
const cp = require('child_process');
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const [src, gen, out] = process.argv.slice(2);
if (!out) {
	console.error('usage: flamegraph_script.js FLAMEGRAPH_JS TEST_FLAMEGRAPH OUT_DIR');
	process.exit(2);
}

let failures = 0;
function check(name, fn) {
	try {
		fn();
		console.log('ok   ' + name);
	} catch (e) {
		failures++;
		console.log('FAIL ' + name + ': ' + (e && e.stack ? e.stack : e));
	}
}

// A DOM element: what the script touches and no more.
class El {
	constructor(tag, attrs) {
		this.tag = tag;
		this.attrs = Object.assign({}, attrs || {});
		this.kids = [];
		this.parentNode = null;
		this.textContent = '';
		this.listeners = {};
		const cls = new Set((this.attrs.class || '').split(/\s+/).filter(Boolean));
		this.cls = cls;
		this.classList = {
			add: (...c) => c.forEach((x) => cls.add(x)),
			remove: (...c) => c.forEach((x) => cls.delete(x)),
			contains: (c) => cls.has(c),
		};
	}
	getAttribute(k) {
		return k in this.attrs ? String(this.attrs[k]) : null;
	}
	setAttribute(k, v) {
		this.attrs[k] = String(v);
	}
	appendChild(c) {
		c.parentNode = this;
		this.kids.push(c);
		return c;
	}
	get children() {
		return this.kids;
	}
	get firstElementChild() {
		return this.kids[0] || null;
	}
	get nextElementSibling() {
		const p = this.parentNode;
		return p ? p.kids[p.kids.indexOf(this) + 1] || null : null;
	}
	addEventListener(type, fn) {
		(this.listeners[type] = this.listeners[type] || []).push(fn);
	}
	fire(type, ev) {
		for (const fn of this.listeners[type] || []) fn(ev);
	}
}

function attrsOf(s) {
	const a = {};
	for (const m of s.matchAll(/([\w-]+)="([^"]*)"/g)) a[m[1]] = m[2];
	return a;
}

// The document's frames and script, run in a fresh context.
function load(file) {
	const svg = fs.readFileSync(file, 'utf8');
	const doc = new El('document');
	const byId = {};
	for (const m of svg.matchAll(/<text ([^>]*id="[^"]*"[^>]*)>([^<]*)<\/text>/g)) {
		const e = new El('text', attrsOf(m[1]));
		e.textContent = m[2];
		byId[e.attrs.id] = e;
	}
	const frames = new El('g', {id: 'frames'});
	byId.frames = frames;
	const body = svg.slice(svg.indexOf('<g id="frames">'), svg.indexOf('<script>'));
	for (const m of body.matchAll(/<g><rect ([^>]*)\/>(?:<text ([^>]*)>([^<]*)<\/text>)?<\/g>/g)) {
		const g = frames.appendChild(new El('g'));
		g.appendChild(new El('rect', attrsOf(m[1])));
		if (m[2]) g.appendChild(new El('text', attrsOf(m[2]))).textContent = m[3];
	}
	const script = svg.slice(svg.indexOf('<![CDATA[') + 9, svg.lastIndexOf(']]>'));
	const prompts = [];
	doc.getElementById = (id) => byId[id] || null;
	doc.createElementNS = (ns, tag) => new El(tag);
	const win = {prompt: (q, def) => (prompts.push(def), win.answer)};
	const ctx = vm.createContext({document: doc, window: win});
	vm.runInContext(script, ctx, {filename: file});
	const data = vm.runInContext('({PW, PAD, CW, DIFF, U, TA, TB, AN, BN, D, S})', ctx);
	return {doc, byId, frames, G: frames.kids, fl: win.tpflame, win, prompts, data};
}

const num = (e, k) => +e.getAttribute(k);
const rectOf = (g) => g.firstElementChild;
const nameOf = (t, j) => t.data.S[t.data.D[j * 6 + 1]];
const parentOf = (t, j) => t.data.D[j * 6];
const indexOf = (t, name) => t.G.findIndex((g, j) => nameOf(t, j) === name);
const pct = (x) => (100 * x).toFixed(2) + '%';
function isUnder(t, j, i) {
	for (; j >= 0; j = parentOf(t, j))
		if (j === i) return true;
	return false;
}
// The writer's label rule: floor((w - 6) / CW) characters, cut with "..".
function label(t, j, w) {
	const c = Math.floor((w - 6) / t.data.CW), cps = Array.from(nameOf(t, j));
	if (c < 3) return '';
	return cps.length <= c ? cps.join('') : cps.slice(0, c - 2).join('') + '..';
}
function labelOf(g) {
	const t = rectOf(g).nextElementSibling;
	return t ? t.textContent : '';
}

check('source: node --check, no CDATA end', () => {
	cp.execFileSync(process.execPath, ['--check', src]);
	assert(!fs.readFileSync(src, 'utf8').includes(']]' + '>'), 'the source holds "]]>"');
});

fs.mkdirSync(out, {recursive: true});
for (const f of ['profile.svg', 'diff.svg']) fs.rmSync(path.join(out, f), {force: true});
cp.execFileSync(gen, ['--write', out], {stdio: 'inherit'});
const t = load(path.join(out, 'profile.svg'));
const X0 = t.G.map((g) => num(rectOf(g), 'x')), W0 = t.G.map((g) => num(rectOf(g), 'width'));
const F0 = t.G.map((g) => rectOf(g).getAttribute('fill'));
const H = indexOf(t, 'handleRequest'), R = indexOf(t, 'rsaVerify'), P = indexOf(t, 'parseJSON');
const share = (j) => t.data.D[j * 6 + 4] / t.data.TA;

check('loaded', () => {
	assert(t.G.length >= 8, 'frames: ' + t.G.length);
	assert(H > 0 && R > H && P > H, 'frames named handleRequest, parseJSON, rsaVerify');
	assert.strictEqual(t.data.DIFF, 0);
	assert.strictEqual(t.fl.zoomed(), -1);
	t.G.forEach((g, j) => assert.strictEqual(g.tpI, j));
});

check('hover describes the frame', () => {
	t.frames.fire('mouseover', {target: rectOf(t.G[H])});
	const d = t.byId.details.textContent, p = parentOf(t, H), md = t.data.S[t.data.D[H * 6 + 2]];
	assert(d.startsWith('handleRequest' + (md ? ' in ' + md : '') + ': '), d);
	assert(d.includes(pct(share(H)) + ' of all'), d);
	assert(d.includes(pct(t.data.D[H * 6 + 4] / t.data.D[p * 6 + 4]) + ' of parent'), d);
	t.frames.fire('mouseout', {target: rectOf(t.G[H])});
	assert.strictEqual(t.byId.details.textContent, ' ');
	t.frames.fire('mouseover', {target: rectOf(t.G[0])});
	assert(!t.byId.details.textContent.includes('of parent'), 'the root has no parent');
});

check('click zooms', () => {
	t.frames.fire('click', {target: rectOf(t.G[H])});
	const {PW, PAD} = t.data, sc = PW / W0[H];
	assert.strictEqual(t.fl.zoomed(), H);
	assert(!t.byId.reset.classList.contains('hide'), 'Reset zoom shown');
	t.G.forEach((g, j) => {
		const r = rectOf(g), x = num(r, 'x'), w = num(r, 'width');
		if (isUnder(t, j, H)) {
			assert(!g.cls.has('hide') && !g.cls.has('dim'), nameOf(t, j) + ' shown');
			assert(Math.abs(x - (PAD + (X0[j] - X0[H]) * sc)) < 0.01, nameOf(t, j) + ' x ' + x);
			assert(Math.abs(w - W0[j] * sc) < 0.01, nameOf(t, j) + ' width ' + w);
			assert.strictEqual(labelOf(g), label(t, j, w), nameOf(t, j) + ' label');
		} else if (isUnder(t, H, j)) {
			assert(g.cls.has('dim') && !g.cls.has('hide'), nameOf(t, j) + ' dimmed');
			assert.strictEqual(x, PAD);
			assert.strictEqual(w, PW);
		} else {
			assert(g.cls.has('hide'), nameOf(t, j) + ' hidden');
		}
	});
});

check('zoom labels a frame once too narrow', () => {
	t.fl.zoom(P);
	const j = t.G.findIndex((g, k) => k !== P && isUnder(t, k, P) && !label(t, k, W0[k]));
	assert(j > P, 'a narrow frame under parseJSON');
	assert.strictEqual(labelOf(t.G[j]), label(t, j, num(rectOf(t.G[j]), 'width')));
	assert(labelOf(t.G[j]).length > 0, 'labelled');
});

check('reset zoom restores the layout', () => {
	t.byId.reset.fire('click', {});
	assert.strictEqual(t.fl.zoomed(), -1);
	assert(t.byId.reset.classList.contains('hide'));
	t.G.forEach((g, j) => {
		assert(!g.cls.has('hide') && !g.cls.has('dim'));
		assert(Math.abs(num(rectOf(g), 'x') - X0[j]) < 0.01);
		assert(Math.abs(num(rectOf(g), 'width') - W0[j]) < 0.01);
		assert.strictEqual(labelOf(g), label(t, j, W0[j]));
	});
	t.fl.zoom(0);
	assert.strictEqual(t.fl.zoomed(), -1, 'zooming into the root is a reset');
});

check('search paints matches and sums their share once', () => {
	assert.strictEqual(t.fl.search('^(parseJSON|rsaVerify)$'), 2);
	assert.strictEqual(t.byId.matched.textContent, 'Matched: ' + pct(share(P) + share(R)) + ' (2 frames)');
	t.G.forEach((g, j) => {
		const hit = j === P || j === R;
		assert.strictEqual(rectOf(g).getAttribute('fill'), hit ? '#e600e6' : F0[j], nameOf(t, j));
	});
	assert.strictEqual(t.byId.search.textContent, 'Reset search');
	// rsaVerify is under handleRequest: counted once
	assert.strictEqual(t.fl.search('handleRequest|rsaVerify'), 2);
	assert.strictEqual(t.byId.matched.textContent, 'Matched: ' + pct(share(H)) + ' (2 frames)');
	// not a regular expression: plain text
	assert.strictEqual(t.fl.search('Request('), 0);
	assert.strictEqual(t.byId.matched.textContent, 'Matched: 0.00% (0 frames)');
	assert.strictEqual(t.fl.search('rsaV'), 1);
	t.byId.search.fire('click', {});
	assert.strictEqual(t.byId.search.textContent, 'Search');
	assert.strictEqual(t.byId.matched.textContent, ' ');
	t.G.forEach((g, j) => assert.strictEqual(rectOf(g).getAttribute('fill'), F0[j]));
});

check('Ctrl-F asks, Escape undoes zoom and search', () => {
	let prevented = 0;
	t.win.answer = 'parseJSON';
	t.doc.fire('keydown', {ctrlKey: true, key: 'f', preventDefault: () => prevented++});
	assert.strictEqual(prevented, 1);
	assert.strictEqual(rectOf(t.G[P]).getAttribute('fill'), '#e600e6');
	t.win.answer = null;
	t.byId.search.fire('click', {});
	t.byId.search.fire('click', {});
	assert.deepStrictEqual(t.prompts, ['', ''], 'the prompt starts empty after a reset');
	t.fl.search('parseJSON');
	t.fl.zoom(P);
	t.doc.fire('keydown', {key: 'Escape'});
	assert.strictEqual(t.fl.zoomed(), -1);
	assert.strictEqual(rectOf(t.G[P]).getAttribute('fill'), F0[P]);
	assert.strictEqual(t.byId.matched.textContent, ' ');
});

check('differential hover names both cohorts', () => {
	const d = load(path.join(out, 'diff.svg'));
	assert.strictEqual(d.data.DIFF, 1);
	const j = d.G.findIndex((g, k) => k > 0 && d.data.D[k * 6 + 4] > 0 && d.data.D[k * 6 + 5] > 0);
	assert(j > 0, 'a frame in both cohorts');
	d.frames.fire('mouseover', {target: rectOf(d.G[j])});
	const s = d.byId.details.textContent;
	const sa = d.data.D[j * 6 + 4] / d.data.TA, sb = d.data.D[j * 6 + 5] / d.data.TB;
	const delta = (sa - sb) * 100;
	assert(s.includes(d.data.AN + ' ' + pct(sa)), s);
	assert(s.includes(d.data.BN + ' ' + pct(sb)), s);
	assert(s.endsWith('delta ' + (delta >= 0 ? '+' : '') + delta.toFixed(2) + ' points'), s);
});

if (failures) {
	console.log(failures + ' failed');
	process.exit(1);
}
console.log('all passed');
