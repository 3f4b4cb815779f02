// A stand-in onnxruntime-node for tests/backends/ort_test.cpp (QUORUM_ORT_MODULES points here): a
// model holding a node named crash_here aborts the runner while it serves that model; everything else
// goes to the real package in $QUORUM_ORT_REAL_MODULES.
'use strict';
const fs = require('fs');
const path = require('path');

const real = require(path.join(process.env.QUORUM_ORT_REAL_MODULES, 'onnxruntime-node'));

async function create(model, options) {
  const bytes = typeof model === 'string' ? fs.readFileSync(model) : Buffer.from(model);
  if (bytes.includes('crash_here')) {
    process.stderr.write('stand-in onnxruntime-node: aborting on purpose\n');
    process.abort();
  }
  return real.InferenceSession.create(model, options);
}

module.exports = Object.assign({}, real, {InferenceSession: {create}});
