/*
 * flamegraph.js - the inline script of an SVG flame graph (flamegraph.h).
 *
 * Embedded at build time (cmake/embed_text.cmake, without this comment)
 * as fg_svg_script; flamegraph_svg_write.c writes it after its data in
 * the document's one <![CDATA[ section, so it must never contain the
 * three characters that end that section (tests/unit/flamegraph_script.js
 * checks).
 *
 * The script runs on the data written before it (PW, PAD, CW, DIFF, U,
 * TA, TB, AN, BN, D: six numbers per frame in preorder, S: strings) and on
 * the <g><rect/><text/></g> of each frame in #frames, in the same order:
 * hover fills #details, a click zooms (the frame full width, its ancestors
 * dimmed, the rest hidden; "Reset zoom" or Escape undoes it), "Search" or
 * Ctrl-F asks for a regular expression (plain text when it is not one),
 * paints matches magenta and shows their share without counting a match
 * nested in another twice. Labels are refitted with the same rule as the
 * writer: floor((width - 6) / CW) characters, cut with "..".
 * window.tpflame exposes zoom, reset and search to tests and consoles.
 */
(function () {
'use strict';
var NS = 'http://www.w3.org/2000/svg', MU = String.fromCharCode(181);
var fr = document.getElementById('frames'), G = fr.children, n = G.length;
var details = document.getElementById('details'), matched = document.getElementById('matched');
var reset = document.getElementById('reset'), sbtn = document.getElementById('search');
var X0 = [], W0 = [], F0 = [], DEP = [], zoomed = -1, term = null;
var KIND = ['', ' (kernel)', ' (unsymbolized)', ' (service)', ''];
for (var i = 0; i < n; i++) {
	var r = G[i].firstElementChild, p = D[i * 6];
	X0.push(+r.getAttribute('x'));
	W0.push(+r.getAttribute('width'));
	F0.push(r.getAttribute('fill'));
	DEP.push(p < 0 ? 0 : DEP[p] + 1);
	G[i].tpI = i;
}
function share(v, t) { return t > 0 ? v / t : 0; }
function pct(x) { return (100 * x).toFixed(2) + '%'; }
function fv(v) {
	if (U === 'samples') return v + (v === 1 ? ' sample' : ' samples');
	if (v >= 1e6) return (v / 1e6).toFixed(2) + ' s';
	if (v >= 1e3) return (v / 1e3).toFixed(1) + ' ms';
	return v + ' ' + MU + 's';
}
function frac(j) {
	var a = share(D[j * 6 + 4], TA), b = share(D[j * 6 + 5], TB);
	return TA > 0 && TB > 0 ? (a + b) / 2 : a + b;
}
function describe(j) {
	var p = D[j * 6], a = D[j * 6 + 4], b = D[j * 6 + 5], md = S[D[j * 6 + 2]];
	var s = S[D[j * 6 + 1]] + KIND[D[j * 6 + 3]] + (md ? ' in ' + md : '') + ': ';
	if (!DIFF) {
		s += fv(a) + ', ' + pct(share(a, TA)) + ' of all';
		if (p >= 0) s += ', ' + pct(share(a, D[p * 6 + 4])) + ' of parent';
		return s;
	}
	var sa = share(a, TA), sb = share(b, TB), d = (sa - sb) * 100;
	return s + AN + ' ' + pct(sa) + ' (' + fv(a) + '), ' + BN + ' ' + pct(sb) + ' (' + fv(b) +
		'), delta ' + (d >= 0 ? '+' : '') + d.toFixed(2) + ' points';
}
function label(j, w) {
	var c = Math.floor((w - 6) / CW), nm = S[D[j * 6 + 1]];
	if (c < 3) return '';
	var cps = Array.from(nm);
	return cps.length <= c ? nm : cps.slice(0, c - 2).join('') + '..';
}
function place(j, x, w) {
	var g = G[j], r = g.firstElementChild, t = r.nextElementSibling, s = label(j, w);
	r.setAttribute('x', x.toFixed(2));
	r.setAttribute('width', w.toFixed(2));
	if (!t && s) {
		t = document.createElementNS(NS, 'text');
		t.setAttribute('y', +r.getAttribute('y') + 12);
		g.appendChild(t);
	}
	if (t) {
		t.setAttribute('x', (x + 3).toFixed(2));
		t.textContent = s;
	}
}
function under(j, i) {
	while (DEP[j] > DEP[i]) j = D[j * 6];
	return j === i;
}
function unzoom() {
	for (var j = 0; j < n; j++) {
		G[j].classList.remove('hide', 'dim');
		place(j, X0[j], W0[j]);
	}
	zoomed = -1;
	reset.classList.add('hide');
}
function zoom(i) {
	if (i === 0) return unzoom();
	var sc = PW / W0[i];
	for (var j = 0; j < n; j++) {
		var c = G[j].classList;
		if (under(j, i)) {
			c.remove('hide', 'dim');
			place(j, PAD + (X0[j] - X0[i]) * sc, W0[j] * sc);
		} else if (under(i, j)) {
			c.remove('hide');
			c.add('dim');
			place(j, PAD, PW);
		} else {
			c.add('hide');
			c.remove('dim');
		}
	}
	zoomed = i;
	reset.classList.remove('hide');
}
function search(t) {
	for (var j = 0; j < n; j++) G[j].firstElementChild.setAttribute('fill', F0[j]);
	term = null;
	matched.textContent = ' ';
	sbtn.textContent = 'Search';
	if (t === null || t === undefined || t === '') return 0;
	var re = null, hit = [], cover = [], sum = 0, cnt = 0;
	try { re = new RegExp(t); } catch (e) { re = null; }
	for (j = 0; j < n; j++) {
		var nm = S[D[j * 6 + 1]], p = D[j * 6];
		hit.push(re ? re.test(nm) : nm.indexOf(t) >= 0);
		cover.push(p >= 0 && (hit[p] || cover[p]));
		if (!hit[j]) continue;
		cnt++;
		G[j].firstElementChild.setAttribute('fill', '#e600e6');
		if (!cover[j]) sum += frac(j);
	}
	term = t;
	sbtn.textContent = 'Reset search';
	matched.textContent = 'Matched: ' + pct(sum) + ' (' + cnt + (cnt === 1 ? ' frame)' : ' frames)');
	return cnt;
}
function ask() {
	var t = window.prompt('Search frames (regular expression or text):', term || '');
	if (t !== null) search(t);
}
function frameOf(e) {
	var el = e.target;
	while (el && el.parentNode !== fr) el = el.parentNode;
	return el;
}
fr.addEventListener('mouseover', function (e) {
	var g = frameOf(e);
	if (g) details.textContent = describe(g.tpI);
});
fr.addEventListener('mouseout', function () { details.textContent = ' '; });
fr.addEventListener('click', function (e) {
	var g = frameOf(e);
	if (g) zoom(g.tpI);
});
reset.addEventListener('click', unzoom);
sbtn.addEventListener('click', function () {
	if (term !== null) search(null);
	else ask();
});
document.addEventListener('keydown', function (e) {
	if ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) {
		e.preventDefault();
		ask();
	} else if (e.key === 'Escape') {
		unzoom();
		search(null);
	}
});
window.tpflame = {zoom: zoom, reset: unzoom, search: search, zoomed: function () { return zoomed; }};
})();
