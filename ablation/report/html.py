"""index.html: REPORT.md's own Markdown subset rendered as HTML, with the plots."""

from __future__ import annotations

import html
import re


def _inline(text: str) -> str:
    """The inline markup REPORT.md uses: **bold** and `code`."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def markdown_to_html(md: str) -> str:
    """REPORT.md's own subset (headings, tables, lists, paragraphs) as HTML, so the page can never
    say anything the Markdown does not: one source, two renderings."""
    parts, table, para, items, list_tag = [], None, [], [], None

    def flush():
        nonlocal table, para, items, list_tag
        if items:
            parts.append(f"<{list_tag}>" + "".join(f"<li>{_inline(x)}</li>" for x in items) + f"</{list_tag}>")
        if table is not None:
            head, *body = table
            parts.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
                         + "</table>")
        if para:
            parts.append(f"<p>{_inline(' '.join(para))}</p>")
        table, para, items, list_tag = None, [], [], None

    for line in md.splitlines():
        if line.startswith("|"):
            if para:
                flush()
            if not line.startswith("|---"):
                table = (table or []) + [[c.strip() for c in line.strip().strip("|").split(" | ")]]
            continue
        if table is not None:
            flush()
        m = re.match(r"^(#{1,6}) (.*)", line)
        if m:
            flush()
            parts.append(f"<h{len(m.group(1))}>{_inline(m.group(2))}</h{len(m.group(1))}>")
        elif item := re.match(r"^(- |\d+\. )(.*)", line):
            tag = "ul" if item.group(1) == "- " else "ol"
            if list_tag != tag:
                flush()
                list_tag = tag
            items.append(item.group(2))
        elif line.strip():
            if items:
                flush()
            para.append(line.strip())
        else:
            flush()
    flush()
    return "\n".join(parts)


def report_html(title: str, md: str, plots: list[tuple[str, str]]) -> str:
    css = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#eee}p,li{color:#333}"
           "img{max-width:100%}")
    figures = "".join(f"<figure><img src='{html.escape(p)}' alt='{html.escape(c)}'>"
                      f"<figcaption>{html.escape(c)} (<code>{html.escape(p)}</code>)</figcaption></figure>"
                      for p, c in plots)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body>{markdown_to_html(md)}<h2>Plots</h2>{figures}</body></html>\n")
