# SPDX-License-Identifier: MIT
# report.awk - turn the result records of the bench programs (bench.h) into
# the one table: results.md (and the same table on stdout), results.json,
# one .dat file per plotted curve, and one line (summary) saying which
# targets the run met, for the run history of bench/results.md.
#
# usage: awk -f report.awk -v md=FILE -v json=FILE -v summary=FILE -v dir=DIR
#	results.tsv
BEGIN {
	FS = "\t"
	nfig = 0; nnote = 0; nlim = 0; nsetup = 0; ncurve = 0
}

$1 == "setup" { setup_key[++nsetup] = $2; setup_val[nsetup] = $3 }
$1 == "note" { note[++nnote] = $3 }
$1 == "lim" { limkey[++nlim] = $2; lim[nlim] = $3 }

$1 == "fig" {
	k = $2
	if (!(k in fidx)) { fidx[k] = ++nfig; fkey[nfig] = k }
	fpart[k] = $3; flabel[k] = $4; funit[k] = $5
	fmed[k] = $6; fp99[k] = $7; flo[k] = $8; fhi[k] = $9; fn[k] = $10
}

$1 == "anc" {
	k = $2
	i = ++nanc[k]
	alabel[k, i] = $3; aunit[k, i] = $4
	amed[k, i] = $5; ap99[k, i] = $6; alo[k, i] = $7; ahi[k, i] = $8
	an[k, i] = $9
}

$1 == "tgt" {
	k = $2
	i = ++ntgt[k]
	ttext[k, i] = $3; tstat[k, i] = $4; tdet[k, i] = $5
}

$1 == "pt" {
	c = $2
	if (!(c in cidx)) { cidx[c] = ++ncurve; cname[ncurve] = c }
	j = ++npt[c]
	px[c, j] = $3; pmed[c, j] = $4; pp99[c, j] = $5
	plo[c, j] = $6; phi[c, j] = $7
}

function isnum(v) { return v != "" && v != "nan" && v != "-nan" }

# Three significant digits, with k/M suffixes for big rates and counts.
function num(v, unit,    a) {
	if (!isnum(v))
		return "-"
	if (unit == "bytes")
		return sprintf("%d", v)
	a = v < 0 ? -v : v
	if (a >= 1e6)
		return sprintf("%.3gM", v / 1e6)
	if (a >= 1e4)
		return sprintf("%.3gk", v / 1e3)
	if (a >= 100)
		return nosign0(sprintf("%.0f", v))
	if (a >= 10)
		return sprintf("%.1f", v)
	return nosign0(sprintf("%.2f", v))
}

# A value that rounds to zero prints as zero, never as "-0.00".
function nosign0(s) {
	if (s ~ /^-0(\.0*)?$/)
		return substr(s, 2)
	return s
}

function range(lo, hi, unit) {
	if (!isnum(lo) || lo == hi)
		return "-"
	return num(lo, unit) "-" num(hi, unit)
}

function ratio(a, b,    r) {
	if (!isnum(a) || !isnum(b) || a + 0 == 0 || b + 0 == 0)
		return ""
	r = a / b
	if (r >= 0.1)
		return sprintf("%.2fx", r)
	if (r >= 0.01)
		return sprintf("%.3fx", r)
	return sprintf("%.2gx", r)
}

function jstr(s) {
	gsub(/\\/, "\\\\", s)
	gsub(/"/, "\\\"", s)
	return "\"" s "\""
}

function jnum(v) { return isnum(v) ? v + 0 : "null" }

function row(s) {
	print s > md
	print s
}

function setup_of(key,    i) {
	for (i = 1; i <= nsetup; i++)
		if (setup_key[i] == key)
			return setup_val[i]
	return ""
}

# Every target of the run in one short table (stdout and results.md), and
# the one-line summary.
function targets(    f, k, i, n, met, missed, line) {
	n = 0; met = 0; missed = ""
	print "## Targets (status as measured in this run)" > md
	print "" > md
	row("| part | figure | target | status |")
	row("|:--|:--|:--|:--|")
	for (f = 1; f <= nfig; f++) {
		k = fkey[f]
		for (i = 1; i <= ntgt[k]; i++) {
			n++
			if (tstat[k, i] == "met")
				met++
			else
				missed = missed (missed == "" ? "" : "; ") \
					 flabel[k] ": " tdet[k, i] " (" \
					 ttext[k, i] ")"
			row("| " fpart[k] " | " flabel[k] " | " ttext[k, i] \
			    " | " (tstat[k, i] == "met" ? "met" : \
				   "**MISSED**") " (" tdet[k, i] ") |")
		}
	}
	if (!n)
		row("|  | (no target among the programs run) |  |  |")
	print "" > md
	print "## Every figure beside its anchors" > md
	print "" > md
	print ""
	line = setup_of("date") ", weblocks " \
	       substr(setup_of("library"), length("weblocks ") + 1) ": " \
	       met " of " n " targets met"
	if (missed != "")
		line = line "; missed: " missed
	if (summary != "")
		print line > summary
}

END {
	print "# weblocks benchmarks" > md
	print "" > md
	for (i = 1; i <= nsetup; i++)
		print "- " setup_key[i] ": " setup_val[i] > md
	print "" > md
	print "Ratio = the weblocks figure / the anchor's, both measured " \
	      "in this run (times: lower is better; rates, shares and " \
	      "scaling: higher is better). median = median over passes " \
	      "of the per-pass medians; p99 = median over passes of the " \
	      "per-pass p99 (for rates: the rate 99% of 10 ms windows " \
	      "beat); range = min-max of the per-pass medians." > md
	print "" > md
	targets()
	row("| part | figure | median | p99 | range | unit | ratio | " \
	    "target | status |")
	row("|:--|:--|--:|--:|--:|:--|--:|:--|:--|")
	for (f = 1; f <= nfig; f++) {
		k = fkey[f]
		tg = ""; st = ""
		for (i = 1; i <= ntgt[k]; i++) {
			tg = tg (i > 1 ? "; " : "") ttext[k, i]
			s = tstat[k, i] == "met" ? "met" : "**MISSED**"
			st = st (i > 1 ? "; " : "") s " (" tdet[k, i] ")"
		}
		row("| " fpart[k] " | **weblocks**: " flabel[k] " | **" \
		    num(fmed[k], funit[k]) "** | " num(fp99[k], funit[k]) \
		    " | " range(flo[k], fhi[k], funit[k]) " | " funit[k] \
		    " |  | " tg " | " st " |")
		for (i = 1; i <= nanc[k]; i++)
			row("|  | vs " alabel[k, i] " | " \
			    num(amed[k, i], aunit[k, i]) " | " \
			    num(ap99[k, i], aunit[k, i]) " | " \
			    range(alo[k, i], ahi[k, i], aunit[k, i]) " | " \
			    aunit[k, i] " | " ratio(fmed[k], amed[k, i]) \
			    " |  |  |")
	}

	print "" > md
	print "## Missed targets: what limits them (measured in this run)" > md
	print "" > md
	if (!nlim)
		print "None missed." > md
	for (i = 1; i <= nlim; i++)
		print "- **" flabel[limkey[i]] "**: " lim[i] > md
	print "" > md
	print "## Notes (measured in this run)" > md
	print "" > md
	for (i = 1; i <= nnote; i++)
		print "- " note[i] > md

	printf "{\n  \"setup\": {" > json
	for (i = 1; i <= nsetup; i++)
		printf "%s\n    %s: %s", (i > 1 ? "," : ""), \
		       jstr(setup_key[i]), jstr(setup_val[i]) > json
	printf "\n  },\n  \"figures\": [" > json
	for (f = 1; f <= nfig; f++) {
		k = fkey[f]
		printf "%s\n    {\"key\": %s, \"part\": %s, \"label\": %s, " \
		       "\"unit\": %s, \"median\": %s, \"p99\": %s, " \
		       "\"range\": [%s, %s], \"passes\": %s,\n" \
		       "     \"anchors\": [", (f > 1 ? "," : ""), jstr(k), \
		       jstr(fpart[k]), jstr(flabel[k]), jstr(funit[k]), \
		       jnum(fmed[k]), jnum(fp99[k]), jnum(flo[k]), \
		       jnum(fhi[k]), jnum(fn[k]) > json
		for (i = 1; i <= nanc[k]; i++) {
			r = ratio(fmed[k], amed[k, i])
			sub(/x$/, "", r)
			printf "%s\n       {\"label\": %s, \"unit\": %s, " \
			       "\"median\": %s, \"p99\": %s, " \
			       "\"range\": [%s, %s], \"ratio\": %s}", \
			       (i > 1 ? "," : ""), jstr(alabel[k, i]), \
			       jstr(aunit[k, i]), jnum(amed[k, i]), \
			       jnum(ap99[k, i]), jnum(alo[k, i]), \
			       jnum(ahi[k, i]), (r == "" ? "null" : r) > json
		}
		printf "],\n     \"targets\": [" > json
		for (i = 1; i <= ntgt[k]; i++)
			printf "%s{\"target\": %s, \"status\": %s, " \
			       "\"value\": %s}", (i > 1 ? ", " : ""), \
			       jstr(ttext[k, i]), jstr(tstat[k, i]), \
			       jstr(tdet[k, i]) > json
		printf "]}" > json
	}
	printf "\n  ],\n  \"limits\": [" > json
	for (i = 1; i <= nlim; i++)
		printf "%s\n    {\"key\": %s, \"text\": %s}", \
		       (i > 1 ? "," : ""), jstr(limkey[i]), jstr(lim[i]) > json
	printf "\n  ],\n  \"curves\": {" > json
	for (c = 1; c <= ncurve; c++) {
		n = cname[c]
		dat = dir "/" n ".dat"
		print "# x median p99 lo hi" > dat
		printf "%s\n    %s: [", (c > 1 ? "," : ""), jstr(n) > json
		for (j = 1; j <= npt[n]; j++) {
			print px[n, j], pmed[n, j], \
			      (isnum(pp99[n, j]) ? pp99[n, j] : "NaN"), \
			      plo[n, j], phi[n, j] > dat
			printf "%s{\"x\": %s, \"median\": %s, \"p99\": %s}", \
			       (j > 1 ? ", " : ""), jnum(px[n, j]), \
			       jnum(pmed[n, j]), jnum(pp99[n, j]) > json
		}
		printf "]" > json
		close(dat)
	}
	printf "\n  },\n  \"notes\": [" > json
	for (i = 1; i <= nnote; i++)
		printf "%s\n    %s", (i > 1 ? "," : ""), jstr(note[i]) > json
	printf "\n  ]\n}\n" > json
}
