// Encodes UTF-8 files with the npm package gpt-3-encoder's own encode() and writes each one's ids,
// one per line, to FILE.node: the reference tests/cli_bpe.sh compares `pelab tokenize --tokenizer
// gpt2` with. One node process for all files (loading the package takes most of a second).
//
//   node tests/lib/gpt2_encode.js PACKAGE_DIR FILE...
//
// The package's encode() appends with Array.concat in a loop, quadratic in the text's length
// (minutes for 200 kB), so the text is cut into pieces of about 2000 characters, each encoded on
// its own. Every cut is at a space that lies between two ASCII letters: there the pre-tokenizer's
// matches are the same whether or not the text is cut (the word before ends at the space, and the
// match " word" starts at it), so the ids are those of encoding the whole text at once.
'use strict';
const path = require('path');
const fs = require('fs');
const enc = require(path.resolve(process.argv[2], 'Encoder.js'));

function encode(text) {
  const out = [];
  for (let start = 0; start < text.length;) {
    let end = text.length;
    if (end - start > 2000) {
      const cut = /(?<=[A-Za-z]) (?=[A-Za-z])/g;
      cut.lastIndex = start + 2000;
      const m = cut.exec(text);
      if (m) end = m.index;
    }
    for (const id of enc.encode(text.slice(start, end))) out.push(id);
    start = end;
  }
  return out;
}

for (const file of process.argv.slice(3)) {
  const ids = encode(fs.readFileSync(file, 'utf8'));
  fs.writeFileSync(file + '.node', ids.length ? ids.join('\n') + '\n' : '');
}
