#!/usr/bin/env python3
"""check_html.py FILE.html [required-id ...] — strict checks of a report page trm wrote:
the HTML5 doctype, every element closed in order (void elements excepted), known entity
references only, unique ids, one <title>, a UTF-8 <meta charset>, no <script> and nothing
fetched from elsewhere (src/href/url() to http:, https: or //), each inline <svg> a
well-formed XML document, and the sections whose ids are given. Exits 1 naming the first
problem and its line."""
import html.entities
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# HTML elements and the SVG ones trm draws with (lower-cased as html.parser reports them)
KNOWN = {"html", "head", "body", "title", "meta", "style", "header", "footer", "section", "h1", "h2", "h3", "p",
         "b", "code", "pre", "div", "table", "thead", "tbody", "tr", "th", "td", "figure", "figcaption", "details",
         "summary", "span", "br",
         "svg", "rect", "line", "polyline", "path", "circle", "text", "g", "title"}


class Checker(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.stack, self.ids, self.titles, self.errors = [], set(), 0, []
        self.doctype = self.charset = False

    def err(self, msg):
        self.errors.append("line %d: %s" % (self.getpos()[0], msg))

    def handle_decl(self, decl):
        self.doctype |= decl.lower() == "doctype html"

    def check_attrs(self, tag, attrs):
        for k, v in attrs:
            if v is None and tag != "svg":
                continue
            if k in ("src", "href", "xlink:href") and re.match(r"^(https?:)?//", v or "", re.I):
                self.err("<%s %s=%r> fetches from elsewhere" % (tag, k, v))
            if k == "id":
                if v in self.ids:
                    self.err("duplicate id %r" % v)
                self.ids.add(v)
            if k == "style" and re.search(r"url\(", v or "", re.I):
                self.err("inline style with url()")
        if tag == "meta" and dict(attrs).get("charset", "").lower() == "utf-8":
            self.charset = True

    def handle_starttag(self, tag, attrs):
        if tag not in KNOWN:
            self.err("unexpected element <%s>" % tag)
        if tag == "script":
            self.err("<script> in the page")
        if tag == "title" and (not self.stack or self.stack[-1] == "head"):
            self.titles += 1
        self.check_attrs(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag not in KNOWN:
            self.err("unexpected element <%s/>" % tag)
        self.check_attrs(tag, attrs)

    def handle_endtag(self, tag):
        if tag in VOID:
            self.err("end tag of the void element </%s>" % tag)
        elif not self.stack or self.stack[-1] != tag:
            self.err("</%s> closes %s" % (tag, "<%s>" % self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()

    def handle_entityref(self, name):
        if name not in html.entities.name2codepoint:
            self.err("unknown entity &%s;" % name)

    def handle_data(self, data):
        if "<" in data and self.stack and self.stack[-1] not in ("style",):
            self.err("a raw '<' in text")


def main():
    path, ids = sys.argv[1], sys.argv[2:]
    text = open(path, encoding="utf-8").read()
    c = Checker()
    c.feed(text)
    c.close()
    if not c.doctype:
        c.errors.append("no <!DOCTYPE html>")
    if c.stack:
        c.errors.append("unclosed elements at the end: %s" % c.stack)
    if c.titles != 1:
        c.errors.append("%d <title> elements in <head>, expected 1" % c.titles)
    if not c.charset:
        c.errors.append('no <meta charset="utf-8">')
    for i in ids:
        if i not in c.ids:
            c.errors.append("no element with id %r" % i)
    for n, svg in enumerate(re.findall(r"<svg\b.*?</svg>", text, re.S)):
        try:
            ET.fromstring(svg)
        except ET.ParseError as e:
            c.errors.append("inline <svg> #%d is not well-formed XML: %s" % (n + 1, e))
    if c.errors:
        print("%s: %s" % (path, c.errors[0]))
        if len(c.errors) > 1:
            print("(and %d more problems)" % (len(c.errors) - 1))
        sys.exit(1)
    print("%s: valid (%d ids, %d inline svg)" % (path, len(c.ids), text.count("<svg")))


main()
