// Offline API reference for an OpenAPI 3.x document (no framework, no build
// step). Every piece of text taken from the spec goes into the DOM through
// createElement/textContent, never as markup.
'use strict';
(function () {
  var METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
  var TOKEN_KEY = 'proctor-docs-token';
  var OPEN_DEPTH = 1; // nested schema nodes deeper than this start collapsed
  var spec = {};
  var entries = []; // {hay, link, li, el, group}
  var groupsUI = []; // {nav, main, items}

  function $(id) { return document.getElementById(id); }
  function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function has(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function str(v) { return v == null ? '' : String(v); }
  function json(v) { try { return JSON.stringify(v); } catch (e) { return String(v); } }

  // h builds an element. Attribute values and children are set as attributes
  // and text nodes, so spec data can never become markup.
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v == null || v === false) return;
        if (k === 'class') el.className = v;
        else if (k === 'value') el.value = v;
        else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? '' : String(v));
      });
    }
    add(el, Array.prototype.slice.call(arguments, 2));
    return el;
  }
  function add(el, kids) {
    kids.forEach(function (c) {
      if (c == null || c === false || c === '') return;
      if (Array.isArray(c)) add(el, c);
      else el.append(c instanceof Node ? c : String(c));
    });
    return el;
  }

  // ---- tiny, safe text formatting (paragraphs, lists, `code`, **bold**) ----
  function inline(text) {
    var out = [];
    String(text).split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/).forEach(function (part) {
      if (/^`[^`]+`$/.test(part)) out.push(h('code', null, part.slice(1, -1)));
      else if (/^\*\*[^*]+\*\*$/.test(part)) out.push(h('strong', null, part.slice(2, -2)));
      else if (part) out.push(part);
    });
    return out;
  }
  function richText(text, cls) {
    var wrap = h('div', { class: 'md' + (cls ? ' ' + cls : '') });
    String(text).replace(/\r\n?/g, '\n').trim().split(/\n{2,}/).forEach(function (block) {
      var lines = block.split('\n');
      if (/^```/.test(block)) {
        wrap.append(h('pre', null, lines.filter(function (l) { return !/^```/.test(l); }).join('\n')));
      } else if (lines.every(function (l) { return /^\s*([-*]|\d+\.)\s/.test(l); })) {
        wrap.append(h('ul', null, lines.map(function (l) { return h('li', null, inline(l.replace(/^\s*([-*]|\d+\.)\s+/, ''))); })));
      } else if (/^#{1,6}\s/.test(block) && lines.length === 1) {
        wrap.append(h('p', { class: 'md-h' }, inline(block.replace(/^#+\s*/, ''))));
      } else {
        wrap.append(h('p', null, inline(block)));
      }
    });
    return wrap;
  }

  // ---- $ref resolution -------------------------------------------------
  function pointer(ref) {
    if (typeof ref !== 'string' || ref.charAt(0) !== '#') return undefined;
    var cur = spec;
    var parts = ref.slice(1).split('/').slice(1);
    for (var i = 0; i < parts.length; i++) {
      var p;
      try { p = decodeURIComponent(parts[i]); } catch (e) { p = parts[i]; }
      p = p.replace(/~1/g, '/').replace(/~0/g, '~');
      if (!cur || typeof cur !== 'object' || !has(cur, p)) return undefined;
      cur = cur[p];
    }
    return cur;
  }
  function refName(ref) { var m = /([^/]+)$/.exec(ref); return m ? m[1].replace(/~1/g, '/').replace(/~0/g, '~') : ref; }

  // deref follows a chain of $refs (guarding against loops). Sibling keys of
  // a $ref (3.1 allows description etc.) override the target's.
  function deref(s) {
    var refs = [], name = null, missing = null, cycle = false;
    while (s && typeof s === 'object' && typeof s.$ref === 'string') {
      var ref = s.$ref;
      if (refs.indexOf(ref) >= 0) { cycle = true; s = {}; break; }
      refs.push(ref);
      if (!name) name = refName(ref);
      var target = pointer(ref);
      if (target === undefined) { missing = ref; s = {}; break; }
      var keys = Object.keys(s).filter(function (k) { return k !== '$ref'; });
      if (keys.length) {
        var merged = Object.assign({}, obj(target));
        keys.forEach(function (k) { merged[k] = s[k]; });
        s = merged;
      } else {
        s = target;
      }
    }
    return { schema: obj(s), name: name, refs: refs, missing: missing, cycle: cycle };
  }
  function derefObj(v) { return v ? deref(v).schema : undefined; }

  // mergeAll folds allOf members into one schema (properties and required are
  // combined, other keys filled in where missing).
  function mergeAll(s, guard) {
    s = obj(s);
    if (!Array.isArray(s.allOf)) return s;
    guard = guard || [];
    var out = Object.assign({}, s);
    delete out.allOf;
    out.properties = Object.assign({}, obj(s.properties));
    out.required = arr(s.required).slice();
    s.allOf.forEach(function (sub) {
      var d = deref(sub);
      if (d.refs.some(function (r) { return guard.indexOf(r) >= 0; })) return;
      var m = mergeAll(d.schema, guard.concat(d.refs));
      Object.assign(out.properties, obj(m.properties));
      arr(m.required).forEach(function (r) { if (out.required.indexOf(r) < 0) out.required.push(r); });
      Object.keys(m).forEach(function (k) { if (out[k] === undefined) out[k] = m[k]; });
    });
    if (!Object.keys(out.properties).length) delete out.properties;
    if (!out.type && out.properties) out.type = 'object';
    return out;
  }

  function jsType(v) {
    if (v === null) return 'null';
    if (Array.isArray(v)) return 'array';
    if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
    return typeof v;
  }
  function typesOf(s) {
    var ts = Array.isArray(s.type) ? s.type.map(String) : typeof s.type === 'string' ? [s.type] : [];
    if (!ts.length) {
      if (s.properties || (s.additionalProperties && typeof s.additionalProperties === 'object')) ts = ['object'];
      else if (s.items) ts = ['array'];
      else if (Array.isArray(s.enum) && s.enum.length) ts = s.enum.map(jsType).filter(function (t, i, a) { return a.indexOf(t) === i; });
      else if (s.const !== undefined) ts = [jsType(s.const)];
    }
    if (s.nullable === true && ts.length && ts.indexOf('null') < 0) ts = ts.concat('null');
    return ts;
  }

  // typeLabel gives a one-line type: "integer (int64)", "Taskset[]",
  // "string | null", "PageTaskset".
  function typeLabel(schema, depth) {
    depth = depth || 0;
    var d = deref(schema);
    if (d.missing) return d.name || 'unresolved';
    if (depth > 4) return d.name || 'any';
    var s = mergeAll(d.schema, d.refs);
    var ts = typesOf(s);
    var parts = ts.map(function (t) {
      if (t === 'array') {
        var it = s.items ? typeLabel(s.items, depth + 1) : 'any';
        return (/[ |]/.test(it) ? '(' + it + ')' : it) + '[]';
      }
      if (t === 'object' && d.name) return d.name;
      if (s.format && t !== 'null' && t !== 'object') return t + ' (' + s.format + ')';
      return t;
    });
    if (!parts.length) {
      var alts = s.oneOf || s.anyOf;
      if (Array.isArray(alts) && alts.length) return alts.map(function (a) { return typeLabel(a, depth + 1); }).join(' | ');
      return d.name || 'any';
    }
    var label = parts.join(' | ');
    if (d.name && parts.indexOf(d.name) < 0 && ts.indexOf('array') < 0) label = d.name + ': ' + label;
    return label;
  }

  function chip(label, value) {
    return h('span', { class: 'chip' }, label, value === undefined ? null : [': ', h('code', null, value)]);
  }
  // constraints lists enum, range, length, pattern and flags of a schema.
  function constraints(s, withDefault) {
    var out = [];
    if (withDefault && s.default !== undefined) out.push(chip('default', json(s.default)));
    if (Array.isArray(s.enum) && s.enum.length) {
      var e = h('span', { class: 'chip enum' }, 'enum: ');
      s.enum.forEach(function (v, i) { if (i) e.append(' '); e.append(h('code', null, typeof v === 'string' ? v : json(v))); });
      out.push(e);
    }
    if (s.const !== undefined) out.push(chip('const', json(s.const)));
    [['minimum', 'min'], ['maximum', 'max'], ['exclusiveMinimum', 'min (exclusive)'], ['exclusiveMaximum', 'max (exclusive)'],
      ['multipleOf', 'multiple of'], ['minLength', 'min length'], ['maxLength', 'max length'], ['pattern', 'pattern'],
      ['minItems', 'min items'], ['maxItems', 'max items'], ['minProperties', 'min properties'], ['maxProperties', 'max properties']
    ].forEach(function (c) {
      var v = s[c[0]];
      if (typeof v === 'number' || (typeof v === 'string' && c[0] === 'pattern')) out.push(chip(c[1], String(v)));
    });
    if (s.uniqueItems) out.push(chip('unique items'));
    if (s.readOnly) out.push(chip('read-only'));
    if (s.writeOnly) out.push(chip('write-only'));
    if (s.deprecated) out.push(h('span', { class: 'chip dep' }, 'deprecated'));
    if (s.example !== undefined) out.push(chip('example', json(s.example)));
    else if (Array.isArray(s.examples) && s.examples.length) out.push(chip('example', json(s.examples[0])));
    return out;
  }

  // ---- schema tree --------------------------------------------------------
  // refsOf returns the $refs a node stands for, looking through arrays.
  function refsOf(schema) {
    var refs = [], depth = 0;
    while (schema && depth++ < 5) {
      var d = deref(schema);
      refs = refs.concat(d.refs);
      var s = mergeAll(d.schema, d.refs);
      if (typesOf(s).indexOf('array') < 0 || !s.items) break;
      schema = s.items;
    }
    return refs;
  }
  function expandable(s, depth) {
    depth = depth || 0;
    if (depth > 5) return false;
    if (Object.keys(obj(s.properties)).length) return true;
    if (s.additionalProperties && typeof s.additionalProperties === 'object') return true;
    if (arr(s.oneOf).length || arr(s.anyOf).length) return true;
    if (s.items && typesOf(s).indexOf('array') >= 0) {
      var d = deref(s.items);
      return expandable(mergeAll(d.schema, d.refs), depth + 1);
    }
    return false;
  }
  function children(s, anc, level) {
    var out = [];
    if (s.items && typesOf(s).indexOf('array') >= 0) {
      var d = deref(s.items);
      var si = mergeAll(d.schema, d.refs);
      if (si.items && typesOf(si).indexOf('array') >= 0) out.push(node('[items]', s.items, false, anc, true, level));
      else out = out.concat(children(si, anc.concat(d.refs), level));
    }
    var req = arr(s.required);
    Object.keys(obj(s.properties)).forEach(function (k) {
      out.push(node(k, s.properties[k], req.indexOf(k) >= 0, anc, false, level));
    });
    if (s.additionalProperties && typeof s.additionalProperties === 'object') {
      out.push(node('{key}', s.additionalProperties, false, anc, true, level));
    } else if (s.additionalProperties === true && !out.length) {
      out.push(h('div', { class: 'node leaf' }, h('span', { class: 'row' }, h('span', { class: 'pname pseudo' }, '{key}'), h('span', { class: 'type' }, 'any'))));
    }
    ['oneOf', 'anyOf'].forEach(function (kw) {
      var alts = arr(s[kw]);
      if (!alts.length) return;
      out.push(h('div', { class: 'alts' }, kw === 'oneOf' ? 'One of:' : 'Any of:'));
      alts.forEach(function (a, i) { out.push(node('option ' + (i + 1), a, false, anc, true, level)); });
    });
    return out;
  }
  function node(name, schema, required, anc, pseudo, level) {
    var d = deref(schema);
    var s = mergeAll(d.schema, d.refs);
    var refs = refsOf(schema);
    var loop = refs.filter(function (r) { return anc.indexOf(r) >= 0; });
    var desc = str(obj(schema).description || s.description);
    var row = h('span', { class: 'row' },
      h('span', { class: pseudo ? 'pname pseudo' : 'pname' }, name),
      required ? h('span', { class: 'req' }, 'required') : null,
      h('span', { class: 'type' }, typeLabel(schema)),
      constraints(s, true),
      loop.length ? h('span', { class: 'chip cycle' }, '\u21bb circular reference to ' + refName(loop[0])) : null,
      desc ? h('span', { class: 'desc' }, inline(desc)) : null);
    if (loop.length || !expandable(s)) return h('div', { class: 'node leaf' }, row);
    var det = h('details', { class: 'node' }, h('summary', null, row));
    var built = false;
    function build() {
      if (built) return;
      built = true;
      det.append(h('div', { class: 'props' }, children(s, anc.concat(refs), level + 1)));
    }
    det.addEventListener('toggle', function () { if (det.open) build(); });
    if (level < OPEN_DEPTH) { build(); det.open = true; }
    return det;
  }
  function schemaTree(schema) {
    var d = deref(schema);
    var s = mergeAll(d.schema, d.refs);
    var anc = refsOf(schema);
    var tree = h('div', { class: 'tree' },
      h('div', { class: 'tree-root' }, h('span', { class: 'type' }, typeLabel(schema)), constraints(s, true)));
    if (s.description) tree.append(h('div', { class: 'desc' }, inline(s.description)));
    var kids = children(s, anc, 0);
    if (kids.length) tree.append(h('div', { class: 'props' }, kids));
    return tree;
  }

  // skeleton makes an example value for a request body from its schema.
  function skeleton(schema, anc, depth) {
    var d = deref(schema);
    if (d.missing || depth > 8) return null;
    var s = mergeAll(d.schema, d.refs);
    var ts = typesOf(s).filter(function (t) { return t !== 'null'; });
    if (d.refs.some(function (r) { return anc.indexOf(r) >= 0; })) return ts[0] === 'array' ? [] : ts[0] === 'object' ? {} : null;
    anc = anc.concat(d.refs);
    if (s.example !== undefined) return s.example;
    if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
    if (s.default !== undefined) return s.default;
    if (s.const !== undefined) return s.const;
    if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
    switch (ts[0]) {
      case 'object':
        var o = {};
        Object.keys(obj(s.properties)).forEach(function (k) {
          var p = deref(s.properties[k]).schema;
          if (k === '$schema' || p.readOnly) return;
          o[k] = skeleton(s.properties[k], anc, depth + 1);
        });
        return o;
      case 'array': return s.items ? [skeleton(s.items, anc, depth + 1)] : [];
      case 'string': return '';
      case 'integer': case 'number':
        if (typeof s.minimum === 'number') return s.minimum;
        if (typeof s.exclusiveMinimum === 'number') return s.exclusiveMinimum + 1;
        return 0;
      case 'boolean': return false;
    }
    var alts = arr(s.oneOf).concat(arr(s.anyOf));
    if (alts.length) {
      var pick = alts.filter(function (a) { return typesOf(deref(a).schema).indexOf('null') < 0; })[0] || alts[0];
      return skeleton(pick, anc, depth + 1);
    }
    return null;
  }

  // ---- security ---------------------------------------------------------------
  function schemeLabel(name) {
    var s = derefObj(obj(obj(spec.components).securitySchemes)[name]) || {};
    var scheme = str(s.scheme).toLowerCase();
    if (s.type === 'http' && scheme === 'bearer') return 'API key (bearer)';
    if (s.type === 'http' && scheme === 'basic') return 'HTTP basic';
    if (s.type === 'apiKey') return 'API key (' + str(s.in || 'header') + ' ' + str(s.name) + ')';
    if (s.type === 'oauth2') return 'OAuth 2';
    if (s.type === 'openIdConnect') return 'OpenID Connect';
    return name;
  }
  function authOf(op) {
    var sec = Array.isArray(op.security) ? op.security : Array.isArray(spec.security) ? spec.security : [];
    var optional = sec.some(function (r) { return !Object.keys(obj(r)).length; });
    var names = [];
    sec.forEach(function (r) { Object.keys(obj(r)).forEach(function (n) { if (names.indexOf(n) < 0) names.push(n); }); });
    if (!names.length) return { kind: 'none', label: 'no auth', schemes: [] };
    var detail = names.map(schemeLabel).join(' or ');
    if (optional) return { kind: 'optional', label: 'optional auth', detail: detail, schemes: names };
    return { kind: 'required', label: detail, schemes: names };
  }
  function authBadge(auth) {
    return [h('span', { class: 'auth ' + auth.kind }, auth.label), auth.detail ? h('span', { class: 'muted' }, ' \u00b7 ' + auth.detail) : null];
  }

  // ---- operations ---------------------------------------------------------------
  function fallbackTag(path) {
    var segs = String(path).split('/').filter(Boolean);
    var i = /^v\d+$/.test(segs[0] || '') ? 1 : 0;
    return (segs[i] || segs[0] || 'default').replace(/[{}]/g, '');
  }
  function collect() {
    var groups = {}, order = [], info = {}, used = {};
    function group(name) { if (!has(groups, name)) { groups[name] = []; order.push(name); } return groups[name]; }
    var lower = {};
    arr(spec.tags).forEach(function (t) {
      if (t && t.name != null) { info[String(t.name)] = t; lower[String(t.name).toLowerCase()] = String(t.name); group(String(t.name)); }
    });
    Object.keys(obj(spec.paths)).forEach(function (path) {
      var item = derefObj(spec.paths[path]) || {};
      METHODS.forEach(function (m) {
        var op = item[m];
        if (!op || typeof op !== 'object') return;
        var tag = Array.isArray(op.tags) && op.tags.length ? String(op.tags[0]) : fallbackTag(path);
        if (!has(info, tag) && has(lower, tag.toLowerCase())) tag = lower[tag.toLowerCase()];
        var id = op.operationId ? String(op.operationId) : m + '-' + path.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
        while (used[id]) id += '_';
        used[id] = true;
        group(tag).push({ method: m, path: path, op: op, item: item, id: id });
      });
    });
    return order.filter(function (n) { return groups[n].length; }).map(function (n) { return { name: n, ops: groups[n], info: info[n] }; });
  }
  function paramsOf(o) {
    var list = [], index = {};
    arr(o.item.parameters).concat(arr(o.op.parameters)).forEach(function (raw) {
      var p = derefObj(raw);
      if (!p || !p.name) return;
      var key = p.in + ':' + p.name;
      if (has(index, key)) list[index[key]] = p;
      else { index[key] = list.length; list.push(p); }
    });
    return list;
  }
  function paramSchema(p) {
    if (p.schema) return p.schema;
    var c = obj(p.content);
    var k = Object.keys(c)[0];
    return k ? obj(c[k]).schema || {} : {};
  }
  function badge(method, small) { return h('span', { class: 'badge ' + method + (small ? ' small' : '') }, method.toUpperCase()); }
  function pathNodes(path) {
    return String(path).split(/(\{[^}]+\})/).map(function (part) {
      return /^\{.*\}$/.test(part) ? h('span', { class: 'pp' }, part) : part;
    });
  }
  function anchor(id) { return '#' + encodeURIComponent(id); }

  function paramTable(params) {
    var body = h('tbody');
    params.forEach(function (p) {
      var schema = paramSchema(p);
      var d = deref(schema);
      var s = mergeAll(d.schema, d.refs);
      var desc = str(p.description || s.description);
      body.append(h('tr', null,
        h('td', null, h('code', { class: 'pname' }, p.name), p.deprecated ? h('span', { class: 'chip dep' }, 'deprecated') : null),
        h('td', null, str(p.in)),
        h('td', null, p.required || p.in === 'path' ? h('span', { class: 'req' }, 'required') : h('span', { class: 'muted' }, 'optional')),
        h('td', null, h('span', { class: 'type' }, typeLabel(schema))),
        h('td', null, s.default !== undefined ? h('code', { class: 'dflt' }, typeof s.default === 'string' ? s.default : json(s.default)) : null),
        h('td', null, constraints(s, false), p.example !== undefined ? chip('example', json(p.example)) : null),
        h('td', null, desc ? inline(desc) : null)));
    });
    return h('div', { class: 'table-wrap' }, h('table', { class: 'params' },
      h('thead', null, h('tr', null, ['Name', 'In', 'Required', 'Type', 'Default', 'Allowed', 'Description'].map(function (t) { return h('th', null, t); }))),
      body));
  }
  function mediaBlocks(content) {
    var c = obj(content);
    var keys = Object.keys(c);
    if (!keys.length) return [];
    return keys.map(function (ct) {
      var m = obj(c[ct]);
      var ex = m.example !== undefined ? m.example : undefined;
      if (ex === undefined) {
        var exs = obj(m.examples);
        var first = Object.keys(exs)[0];
        if (first) ex = derefObj(exs[first]).value;
      }
      return h('div', { class: 'media' },
        h('span', { class: 'ctype' }, ct),
        m.schema ? schemaTree(m.schema) : h('p', { class: 'muted' }, 'No schema.'),
        ex !== undefined ? h('details', { class: 'example' }, h('summary', null, 'Example'), h('pre', null, JSON.stringify(ex, null, 2))) : null);
    });
  }
  function statusRank(code) {
    return /^[1-5]/.test(code) ? parseInt(code.replace(/x/gi, '0'), 10) : 1000;
  }
  function statusClass(code) { var c = String(code).charAt(0); return /[1-5]/.test(c) ? 's' + c : 'sd'; }
  function responses(rs) {
    var keys = Object.keys(obj(rs)).sort(function (a, b) { return statusRank(a) - statusRank(b); });
    if (!keys.length) return h('p', { class: 'muted' }, 'No responses documented.');
    return h('div', { class: 'responses' }, keys.map(function (code) {
      var r = derefObj(rs[code]) || {};
      var inner = h('div', { class: 'resp-body' });
      if (r.description && String(r.description).indexOf('\n') >= 0) inner.append(richText(r.description));
      var hdrs = Object.keys(obj(r.headers));
      if (hdrs.length) {
        inner.append(h('span', { class: 'ctype' }, 'Headers'), h('div', { class: 'table-wrap' }, h('table', { class: 'params' }, h('tbody', null, hdrs.map(function (n) {
          var hd = derefObj(r.headers[n]) || {};
          return h('tr', null, h('td', null, h('code', { class: 'pname' }, n)), h('td', null, h('span', { class: 'type' }, typeLabel(hd.schema || {}))), h('td', null, inline(str(hd.description))));
        })))));
      }
      var media = mediaBlocks(r.content);
      if (media.length) add(inner, media); else inner.append(h('p', { class: 'muted' }, 'No response body.'));
      return h('details', { class: 'resp', open: /^2/.test(code) },
        h('summary', null, h('span', { class: 'status ' + statusClass(code) }, code), ' ', h('span', { class: 'resp-desc' }, str(r.description).split('\n')[0])),
        inner);
    }));
  }

  function renderOp(o) {
    var op = o.op;
    var auth = authOf(op);
    var params = paramsOf(o);
    var body = derefObj(op.requestBody);
    var sec = h('section', { class: 'op' + (op.deprecated ? ' deprecated' : ''), id: o.id },
      h('div', { class: 'op-head' }, badge(o.method), h('code', { class: 'op-path' }, pathNodes(o.path)),
        op.deprecated ? h('span', { class: 'flag-dep' }, 'deprecated') : null,
        h('a', { class: 'permalink', href: anchor(o.id), title: 'Link to this operation' }, '#')),
      op.summary ? h('h3', { class: 'op-summary' }, str(op.summary)) : null,
      h('dl', { class: 'op-meta' },
        h('dt', null, 'operationId'), h('dd', null, h('code', null, op.operationId ? str(op.operationId) : '\u2014')),
        h('dt', null, 'Auth'), h('dd', null, authBadge(auth))),
      op.description ? richText(op.description) : null);
    if (params.length) sec.append(h('h4', null, 'Parameters'), paramTable(params));
    if (body) {
      sec.append(h('h4', null, 'Request body ', h('span', { class: body.required ? 'req' : 'muted' }, body.required ? 'required' : 'optional')));
      if (body.description) sec.append(richText(body.description));
      add(sec, mediaBlocks(body.content));
    }
    sec.append(h('h4', null, 'Responses'), responses(op.responses), tryPanel(o, params, body, auth));
    return sec;
  }

  // ---- try it -------------------------------------------------------------------
  function tryPanel(o, params, body, auth) {
    var det = h('details', { class: 'try' }, h('summary', null, 'Try it'));
    var built = false;
    det.addEventListener('toggle', function () {
      if (det.open && !built) { built = true; det.append(tryForm(o, params, body, auth)); }
    });
    return det;
  }
  function basePath() {
    var s = arr(spec.servers)[0];
    if (!s || typeof s.url !== 'string') return '';
    try { return new URL(s.url, location.href).pathname.replace(/\/+$/, ''); } catch (e) { return ''; }
  }
  function currentToken() { var t = $('dui-token'); return t ? t.value.trim() : ''; }
  function tryForm(o, params, body, auth) {
    var method = o.method.toUpperCase();
    var form = h('form', { class: 'try-form', novalidate: true });
    var inputs = [];
    var usable = params.filter(function (p) { return p.in === 'path' || p.in === 'query' || p.in === 'header'; });
    if (usable.length) {
      var grid = h('div', { class: 'try-params' });
      usable.forEach(function (p) {
        var schema = paramSchema(p);
        var d = deref(schema);
        var s = mergeAll(d.schema, d.refs);
        var input;
        var ts = typesOf(s);
        var choices = Array.isArray(s.enum) && s.enum.length ? s.enum : ts[0] === 'boolean' ? [true, false] : null;
        if (choices) {
          input = h('select', null, h('option', { value: '' }, s.default !== undefined ? '(default: ' + json(s.default) + ')' : '\u2014'),
            choices.map(function (v) { return h('option', { value: String(v) }, String(v)); }));
        } else {
          input = h('input', { type: 'text', spellcheck: 'false',
            placeholder: s.default !== undefined ? 'default: ' + json(s.default) : typeLabel(schema) + (ts.indexOf('array') >= 0 ? ', comma-separated' : '') });
        }
        grid.append(h('label', { class: 'try-field' },
          h('span', { class: 'try-label' }, h('code', null, p.name), p.required || p.in === 'path' ? h('span', { class: 'req' }, ' *') : null, h('span', { class: 'muted' }, ' ' + p.in)),
          input));
        inputs.push({ p: p, input: input, schema: s });
      });
      form.append(grid);
    }
    var skipped = params.filter(function (p) { return usable.indexOf(p) < 0; });
    if (skipped.length) form.append(h('p', { class: 'muted small' }, 'Not settable here: ' + skipped.map(function (p) { return p.name + ' (' + p.in + ')'; }).join(', ')));
    form.append(h('p', { class: 'muted small' }, auth.kind === 'none' ? 'This operation needs no authentication.'
      : 'Sends the bearer token from the top bar' + (auth.kind === 'optional' ? ' if one is set.' : '.')));

    var area = null, ctSel = null, cts = [];
    if (body && method !== 'GET' && method !== 'HEAD') {
      var content = obj(body.content);
      cts = Object.keys(content);
      if (!cts.length) cts = ['application/json'];
      cts.sort(function (a, b) { return (/json/.test(b) ? 1 : 0) - (/json/.test(a) ? 1 : 0); });
      var fill = function () {
        var m = obj(content[ctSel ? ctSel.value : cts[0]]);
        var v = m.example !== undefined ? m.example : m.schema ? skeleton(m.schema, [], 0) : {};
        area.value = typeof v === 'string' ? v : JSON.stringify(v, null, 2);
      };
      area = h('textarea', { class: 'try-bodyin', spellcheck: 'false', 'aria-label': 'Request body' });
      if (cts.length > 1) ctSel = h('select', { onchange: fill }, cts.map(function (c) { return h('option', { value: c }, c); }));
      form.append(h('div', { class: 'try-bodyhead' }, h('span', null, 'Body'), ctSel || h('span', { class: 'ctype' }, cts[0]),
        h('button', { type: 'button', class: 'btn secondary small', onclick: fill }, 'Reset to skeleton')), area);
      fill();
    }
    var btn = h('button', { type: 'submit', class: 'btn' }, 'Send');
    var out = h('div', { class: 'try-out', 'aria-live': 'polite', hidden: true });
    form.append(h('div', { class: 'try-actions' }, btn, h('code', { class: 'muted' }, method + ' ' + basePath() + o.path)), out);

    function show() { out.hidden = false; out.replaceChildren(); add(out, Array.prototype.slice.call(arguments)); }
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var path = o.path, q = new URLSearchParams(), headers = new Headers(), missing = [];
      headers.set('Accept', 'application/json, application/problem+json;q=0.9, */*;q=0.8');
      try {
        inputs.forEach(function (f) {
          var v = f.input.value.trim();
          if (!v) { if (f.p.required || f.p.in === 'path') missing.push(f.p.name); return; }
          if (f.p.in === 'path') path = path.split('{' + f.p.name + '}').join(encodeURIComponent(v));
          else if (f.p.in === 'header') headers.set(f.p.name, v);
          else if (typesOf(f.schema).indexOf('array') >= 0) {
            var parts = v.split(',').map(function (x) { return x.trim(); }).filter(Boolean);
            if (f.p.explode === false) q.append(f.p.name, parts.join(','));
            else parts.forEach(function (x) { q.append(f.p.name, x); });
          } else q.append(f.p.name, v);
        });
      } catch (e) { show(h('p', { class: 'err' }, 'Invalid input: ' + e.message)); return; }
      if (missing.length) { show(h('p', { class: 'err' }, 'Missing required parameter: ' + missing.join(', '))); return; }
      var token = currentToken();
      if (token && auth.kind !== 'none') {
        var sch = obj(obj(obj(spec.components).securitySchemes)[auth.schemes[0]]);
        if (sch.type === 'apiKey' && sch.in === 'header' && sch.name) headers.set(String(sch.name), token);
        else headers.set('Authorization', /^bearer\s/i.test(token) ? token : 'Bearer ' + token);
      }
      var init = { method: method, headers: headers, credentials: 'same-origin', cache: 'no-store' };
      if (area && area.value.trim()) {
        var ct = ctSel ? ctSel.value : cts[0];
        if (/json/.test(ct)) {
          try { JSON.parse(area.value); } catch (e) { show(h('p', { class: 'err' }, 'The body is not valid JSON: ' + e.message)); return; }
        }
        headers.set('Content-Type', ct);
        init.body = area.value;
      }
      var qs = q.toString();
      var url = basePath() + path + (qs ? '?' + qs : '');
      var t0 = performance.now();
      btn.disabled = true;
      show(h('p', { class: 'muted' }, 'Sending ' + method + ' ' + url + ' \u2026'));
      fetch(url, init).then(function (res) {
        return res.text().then(function (text) {
          var ms = Math.round(performance.now() - t0);
          var ct = res.headers.get('Content-Type') || '';
          var pretty = text;
          if (/json/.test(ct) || /^\s*[{[]/.test(text)) { try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* keep raw */ } }
          if (pretty.length > 200000) pretty = pretty.slice(0, 200000) + '\n\u2026 (truncated)';
          show(h('div', { class: 'try-status' }, h('span', { class: 'status ' + statusClass(res.status) }, String(res.status)), ' ',
            h('strong', null, res.statusText || ''), h('span', { class: 'muted' }, ' \u00b7 ' + ms + ' ms' + (ct ? ' \u00b7 ' + ct : ''))),
            h('code', { class: 'try-url muted' }, method + ' ' + url),
            text ? h('pre', { class: 'try-resp' }, pretty) : h('p', { class: 'muted' }, 'Empty body.'));
        });
      }).catch(function (e) {
        show(h('p', { class: 'err' }, 'Request failed: ' + (e && e.message ? e.message : String(e))));
      }).then(function () { btn.disabled = false; });
    });
    return form;
  }

  // ---- page ----------------------------------------------------------------------
  function render() {
    var info = obj(spec.info);
    var title = str(info.title) || 'API reference';
    document.title = title + ' \u2013 API reference';
    $('dui-title').textContent = title;
    if (info.version != null) { $('dui-version').textContent = str(info.version); $('dui-version').hidden = false; }
    var main = $('dui-main'), nav = $('dui-nav');
    main.replaceChildren(h('section', { class: 'intro' }, h('h1', null, title),
      h('div', { class: 'intro-meta' }, info.version != null ? h('span', { class: 'pill' }, 'version ' + info.version) : null,
        spec.openapi ? h('span', { class: 'pill muted' }, 'OpenAPI ' + spec.openapi) : null),
      info.description ? richText(info.description) : null));
    nav.replaceChildren();
    entries = []; groupsUI = [];

    function addGroup(name, description, items) {
      var ul = h('ul');
      var navGroup = h('div', { class: 'nav-group' }, h('div', { class: 'nav-tag' }, name), ul);
      var mainGroup = h('section', { class: 'tag-group' }, h('h2', { class: 'tag-title' }, name), description ? richText(description) : null);
      var g = { nav: navGroup, main: mainGroup, items: [] };
      items.forEach(function (it) {
        var link = h('a', { href: anchor(it.id), title: it.title || null, class: it.dep ? 'dep' : null }, it.badge, h('span', { class: 'nav-path' }, it.label));
        var li = h('li', null, link);
        ul.append(li);
        mainGroup.append(it.el);
        var e = { hay: it.hay.toLowerCase(), link: link, li: li, el: it.el, id: it.id };
        entries.push(e); g.items.push(e);
      });
      nav.append(navGroup); main.append(mainGroup); groupsUI.push(g);
    }
    collect().forEach(function (g) {
      addGroup(g.name, g.info && g.info.description, g.ops.map(function (o) {
        return { id: o.id, badge: badge(o.method, true), label: o.path, title: str(o.op.summary), dep: o.op.deprecated,
          hay: [o.method, o.path, str(o.op.summary), str(o.op.operationId)].join(' '), el: renderOp(o) };
      }));
    });
    var schemas = obj(obj(spec.components).schemas);
    var names = Object.keys(schemas);
    if (names.length) {
      addGroup('Schemas', null, names.map(function (n) {
        var id = 'schema-' + n;
        var s = derefObj(schemas[n]) || {};
        return { id: id, badge: h('span', { class: 'badge small schema' }, 'TYPE'), label: n, title: str(s.title || s.description),
          hay: n + ' ' + str(s.description),
          el: h('section', { class: 'op schema-def', id: id }, h('div', { class: 'op-head' }, h('code', { class: 'op-path' }, n),
            h('a', { class: 'permalink', href: anchor(id), title: 'Link to this schema' }, '#')),
            schemaTree({ $ref: '#/components/schemas/' + n.replace(/~/g, '~0').replace(/\//g, '~1') })) };
      }));
    }
    if (!entries.length) main.append(h('p', { class: 'muted' }, 'This document describes no operations.'));
    applyFilter();
    watchActive();
    if (location.hash.length > 1) {
      var target;
      try { target = $(decodeURIComponent(location.hash.slice(1))); } catch (e) { target = null; }
      if (target) target.scrollIntoView();
    }
  }

  function applyFilter() {
    var q = $('dui-filter').value.trim().toLowerCase();
    var shown = 0, ops = 0;
    groupsUI.forEach(function (g) {
      var any = false;
      g.items.forEach(function (e) {
        var ok = !q || e.hay.indexOf(q) >= 0;
        e.li.hidden = !ok; e.el.hidden = !ok;
        if (ok) { any = true; shown++; }
        ops++;
      });
      g.nav.hidden = !any; g.main.hidden = !any;
    });
    $('dui-count').textContent = q ? shown + ' of ' + ops + ' entries match' : ops + ' entries';
  }

  function watchActive() {
    if (!('IntersectionObserver' in window)) return;
    var byId = {}, current = null;
    entries.forEach(function (e) { byId[e.id] = e.link; });
    var io = new IntersectionObserver(function (items) {
      items.forEach(function (it) {
        if (!it.isIntersecting) return;
        var link = byId[it.target.id];
        if (!link || link === current) return;
        if (current) current.classList.remove('active');
        current = link;
        link.classList.add('active');
      });
    }, { rootMargin: '-70px 0px -70% 0px' });
    entries.forEach(function (e) { io.observe(e.el); });
  }

  function showError(url, err) {
    $('dui-main').replaceChildren(h('div', { class: 'error-box' },
      h('h1', null, 'Could not load the API description'),
      h('p', null, 'Fetching ', h('code', null, url), ' failed: ', str(err && err.message ? err.message : err))));
  }

  function init() {
    var tok = $('dui-token');
    $('dui-tokenform').addEventListener('submit', function (ev) { ev.preventDefault(); });
    try { tok.value = sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { /* storage unavailable */ }
    tok.addEventListener('input', function () {
      try {
        if (tok.value.trim()) sessionStorage.setItem(TOKEN_KEY, tok.value.trim());
        else sessionStorage.removeItem(TOKEN_KEY);
      } catch (e) { /* storage unavailable */ }
    });
    var filter = $('dui-filter');
    filter.addEventListener('input', applyFilter);
    document.addEventListener('keydown', function (ev) {
      var a = document.activeElement;
      var typing = a && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA' || a.tagName === 'SELECT' || a.isContentEditable);
      if (ev.key === '/' && !typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey) { ev.preventDefault(); filter.focus(); filter.select(); }
      else if (ev.key === 'Escape' && a === filter) { filter.value = ''; applyFilter(); }
    });
    var url = document.body.getAttribute('data-spec-url') || '/openapi.json';
    fetch(url, { headers: { Accept: 'application/json' }, credentials: 'same-origin' })
      .then(function (res) {
        if (!res.ok) throw new Error('HTTP ' + res.status + ' ' + res.statusText);
        return res.json();
      })
      .then(function (s) {
        spec = obj(s);
        try { render(); } catch (e) { showError(url, new Error('rendering failed: ' + e.message)); throw e; }
      }, function (e) { showError(url, e); });
  }

  init();
})();
