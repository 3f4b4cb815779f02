#!/usr/bin/env node
// Quorum's runner for ONNX Runtime (the `ort` backend), through the npm package onnxruntime-node.
//
// It speaks the exec backend's protocol (docs/exec-backend.md):
//   persistent:  node runner.js [OPTIONS]            one model directory per stdin line, one answer
//                                                    line "STATUS [MESSAGE]" on stdout; EOF: exit 0
//   per model:   node runner.js [OPTIONS] --once DIR (or DIR as the last argument) runs DIR and exits
//                                                    with the status; the message goes to stderr
// A directory holds model.onnx and input_<i>.npy (the i-th graph input); the runner writes
// output_<j>.npy for every graph output j. Status: 0 ok; 4 "unsupported: OpType" (ORT has no kernel
// for the node: NOT_IMPLEMENTED at session creation); 3 the model does not load (any other creation
// failure); 1 the run failed. If onnxruntime-node cannot be loaded at all, the runner exits 2 at
// start-up, before reading any request (a setup error, not a property of any model).
//
// Options: --level=disabled|basic|extended|all (graphOptimizationLevel, default disabled)
//          --threads=N (intraOpNumThreads; default $QUORUM_THREADS or 1; interOpNumThreads is 1)
//          --arena=on|off (enableCpuMemArena, default on)   --mode=sequential|parallel (executionMode)
//          --optimized-model (write the optimized graph to DIR/optimized.onnx)
// Environment: QUORUM_ORT_MODULES=DIR loads DIR/onnxruntime-node (DIR a node_modules folder) instead
// of the node_modules beside this file.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

// stdout carries the answers only: everything else that would print there goes to stderr.
for (const k of ['log', 'info', 'warn', 'debug']) console[k] = console.error;
process.stdout.write = process.stderr.write.bind(process.stderr);
const answer = (line) => fs.writeSync(1, line + '\n');

// ---- options ---------------------------------------------------------------------------------
function usage(msg) {
  process.stderr.write(`runner.js: ${msg}\n`);
  process.exit(2);
}
const opts = { level: 'disabled', threads: Number(process.env.QUORUM_THREADS) || 1, arena: true,
  mode: 'sequential', optimizedModel: false, once: null };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const [key, val] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, null];
  if (key === '--level' && ['disabled', 'basic', 'extended', 'layout', 'all'].includes(val)) opts.level = val;
  else if (key === '--threads' && /^[1-9][0-9]*$/.test(val)) opts.threads = Number(val);
  else if (key === '--arena' && (val === 'on' || val === 'off')) opts.arena = val === 'on';
  else if (key === '--mode' && (val === 'sequential' || val === 'parallel')) opts.mode = val;
  else if (key === '--optimized-model' && val === null) opts.optimizedModel = true;
  else if (key === '--once' && val === null && i + 1 < argv.length) opts.once = argv[++i];
  else if (!a.startsWith('--') && i === argv.length - 1) opts.once = a; // the per-model protocol
  else usage(`bad argument '${a}'`);
}

// ---- onnxruntime-node --------------------------------------------------------------------------
let ort;
try {
  // QUORUM_ORT_MODULES names the folder that holds onnxruntime-node (a node_modules folder), as
  // the backend checks it; else the install beside this file.
  const dir = process.env.QUORUM_ORT_MODULES;
  ort = require(path.join(dir ? path.resolve(dir) : path.join(__dirname, 'node_modules'), 'onnxruntime-node'));
  ort.env.logLevel = 'fatal';  // its errors come back as exceptions; the log would only repeat them
} catch (e) {
  process.stderr.write('ONNX Runtime is not installed: run `make deps` (npm ci in src/backends/ort)' +
    (process.env.QUORUM_ORT_MODULES ? ` or fix QUORUM_ORT_MODULES=${process.env.QUORUM_ORT_MODULES}` : '') +
    ` (${oneLine(String(e && e.message))})\n`);
  process.exit(2);
}

// ---- .npy ------------------------------------------------------------------------------------
// descr without byte order -> [ORT tensor type, typed array]
const DTYPES = {
  f4: ['float32', Float32Array], f8: ['float64', Float64Array], f2: ['float16', Uint16Array],
  i8: ['int64', BigInt64Array], i4: ['int32', Int32Array], i2: ['int16', Int16Array], i1: ['int8', Int8Array],
  u8: ['uint64', BigUint64Array], u4: ['uint32', Uint32Array], u2: ['uint16', Uint16Array],
  u1: ['uint8', Uint8Array], b1: ['bool', Uint8Array],
};
const DESCR = Object.fromEntries(Object.entries(DTYPES).map(([d, [t]]) => [t, d]));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`runner: ${path.basename(file)} is not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', start, start + hlen);
  const descr = /['"]descr['"]\s*:\s*['"]([<>|=]?)([a-z]\d+)['"]/.exec(header);
  const fortran = /['"]fortran_order['"]\s*:\s*(True|False)/.exec(header);
  const shape = /['"]shape['"]\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape || !DTYPES[descr[2]]) throw new Error(`runner: ${path.basename(file)}: unsupported header ${header.trim()}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const [type, Ctor] = DTYPES[descr[2]];
  const count = dims.reduce((a, b) => a * b, 1);
  const bytes = count * Ctor.BYTES_PER_ELEMENT;
  const off = start + hlen;
  if (buf.length - off < bytes) throw new Error(`runner: ${path.basename(file)}: ${buf.length - off} bytes of data, shape needs ${bytes}`);
  const raw = new Uint8Array(bytes);
  raw.set(buf.subarray(off, off + bytes));                       // copy: aligned, owned
  if (descr[1] === '>' && Ctor.BYTES_PER_ELEMENT > 1) swapBytes(raw, Ctor.BYTES_PER_ELEMENT);
  let data = new Ctor(raw.buffer);
  if (fortran[1] === 'True' && dims.length > 1) data = fortranToC(data, dims, Ctor);
  return { type, data, dims };
}

function swapBytes(u8, size) {
  for (let i = 0; i < u8.length; i += size)
    for (let a = i, b = i + size - 1; a < b; a++, b--) { const t = u8[a]; u8[a] = u8[b]; u8[b] = t; }
}

function fortranToC(src, dims, Ctor) {
  const out = new Ctor(src.length);
  const idx = new Array(dims.length).fill(0);
  for (let i = 0; i < src.length; i++) {                         // i walks C order; idx is its index
    let f = 0;                                                   // its Fortran-order offset
    for (let k = 0, stride = 1; k < dims.length; k++) { f += idx[k] * stride; stride *= dims[k]; }
    out[i] = src[f];
    for (let k = dims.length - 1; k >= 0; k--) { if (++idx[k] < dims[k]) break; idx[k] = 0; }
  }
  return out;
}

function writeNpy(file, tensor) {
  const descr = DESCR[tensor.type];
  if (!descr) throw new Error(`runner: output of type ${tensor.type} cannot be written as .npy`);
  const dims = tensor.dims.map(Number);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr.endsWith('1') ? '|' : '<'}${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';   // 10 + len(header) is a multiple of 64
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

// ---- one model -----------------------------------------------------------------------------
function oneLine(s) {
  s = String(s).trim().replace(/\s*\r?\n\s*/g, ' | ');
  return s.length > 2000 ? s.slice(0, 2000) + ' ...' : s;
}

// Messages are deduplicated by Quorum: drop what differs from one model to the next (the directory).
function scrub(msg, dir) {
  return oneLine(msg.split(path.resolve(dir) + '/').join('').split(dir + '/').join(''));
}

function sessionOptions(dir) {
  const o = { graphOptimizationLevel: opts.level, intraOpNumThreads: opts.threads, interOpNumThreads: 1,
    enableCpuMemArena: opts.arena, executionMode: opts.mode, logSeverityLevel: 4 };
  if (opts.optimizedModel) o.optimizedModelFilePath = path.join(dir, 'optimized.onnx');
  return o;
}

// ---- model.onnx: the op types and names of its nodes (a minimal protobuf reader) ----------------
// Fields: ModelProto.graph = 7; GraphProto.node = 1; NodeProto.name = 3, op_type = 4, attribute = 5;
// AttributeProto.g = 6, graphs = 11 (subgraphs).
function pbFields(buf, start, end, onField) {
  let p = start;
  const varint = () => { let v = 0, m = 1, b; do { b = buf[p++]; v += (b & 0x7f) * m; m *= 128; } while (b & 0x80 && p < end); return v; };
  while (p < end) {
    const key = varint(), field = Math.floor(key / 8), wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) { const n = varint(); onField(field, p, p + n); p += n; }
    else throw new Error(`model.onnx: protobuf wire type ${wire}`);
  }
}
function modelNodes(file) {
  const buf = fs.readFileSync(file), nodes = [];
  const graph = (s, e) => pbFields(buf, s, e, (f, a, b) => { if (f === 1) node(a, b); });
  const node = (s, e) => {
    const n = { name: '', op: '' };
    pbFields(buf, s, e, (f, a, b) => {
      if (f === 3) n.name = buf.toString('utf8', a, b);
      else if (f === 4) n.op = buf.toString('utf8', a, b);
      else if (f === 5) pbFields(buf, a, b, (g, c, d) => { if (g === 6 || g === 11) graph(c, d); });
    });
    nodes.push(n);
  };
  pbFields(buf, 0, buf.length, (f, a, b) => { if (f === 7) graph(a, b); });
  return nodes;
}

// ONNX operators defined by a function body: when ORT has no kernel for one, it expands the body, and
// NOT_IMPLEMENTED names an operator of the body (HardSwish -> HardSigmoid, Gelu -> Erf, Mish -> Softplus).
const FUNCTION_OPS = new Set(('AffineGrid Attention Bernoulli BlackmanWindow CastLike Celu CenterCropPad ' +
  'DynamicQuantizeLinear Elu Gelu GreaterOrEqual GroupNormalization HammingWindow HannWindow HardSigmoid ' +
  'HardSwish LayerNormalization LeakyRelu LessOrEqual LogSoftmax MeanVarianceNormalization Mish ' +
  'NegativeLogLikelihoodLoss PRelu Range ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare ' +
  'RMSNormalization RotaryEmbedding Selu SequenceMap Shrink Softmax SoftmaxCrossEntropyLoss Softplus Softsign ' +
  'Swish ThresholdedRelu').split(' '));

// The model's operator that ORT's "Could not find an implementation for OP(v) node with name 'NAME'"
// is about, or null when it cannot be told.
function refusedOp(dir, op, name) {
  let nodes;
  try { nodes = modelNodes(path.join(dir, 'model.onnx')); } catch (e) { return null; }
  if (nodes.some((n) => n.op === op)) return op;
  const byName = name !== '' && nodes.find((n) => n.name === name);
  if (byName) return byName.op;
  const fns = [...new Set(nodes.map((n) => n.op).filter((o) => FUNCTION_OPS.has(o)))];
  return fns.length === 1 ? fns[0] : null;
}

// Returns [status, message].
async function runModel(dir) {
  let session;
  try {
    session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), sessionOptions(dir));
  } catch (e) {
    const msg = String(e && e.message !== undefined ? e.message : e);
    const m = /Could not find an implementation for ([A-Za-z0-9_]+)\(\d+\) node with name '([^']*)'/.exec(msg);
    const op = m && refusedOp(dir, m[1], m[2]);
    if (op) return [4, `unsupported: ${op}`];
    return [3, `ONNX Runtime could not load the model: ${scrub(msg, dir)}`];
  }
  try {
    const feeds = {};
    session.inputNames.forEach((name, i) => {
      const file = path.join(dir, `input_${i}.npy`);
      if (!fs.existsSync(file)) throw new Error(`runner: no input_${i}.npy for graph input '${name}'`);
      const { type, data, dims } = readNpy(file);
      feeds[name] = new ort.Tensor(type, data, dims);
    });
    let results;
    try {
      results = await session.run(feeds);
    } catch (e) {
      return [1, scrub(String(e && e.message !== undefined ? e.message : e), dir)];
    }
    session.outputNames.forEach((name, j) => writeNpy(path.join(dir, `output_${j}.npy`), results[name]));
    return [0, ''];
  } finally {
    try { await session.release(); } catch (e) { console.error(`runner: release: ${e && e.message}`); }
  }
}

async function serve(dir) {
  try {
    return await runModel(dir);
  } catch (e) {                                                  // the runner's own failures
    console.error(e && e.stack || e);
    return [1, scrub(String(e && e.message !== undefined ? e.message : e), dir)];
  }
}

// ---- main ------------------------------------------------------------------------------------
process.on('uncaughtException', (e) => console.error(`runner: uncaught: ${e && e.stack || e}`));
process.on('unhandledRejection', (e) => console.error(`runner: unhandled rejection: ${e && e.stack || e}`));

async function main() {
  if (opts.once !== null) {
    const [status, msg] = await serve(opts.once);
    if (msg) process.stderr.write(msg + '\n');
    process.exit(status);
  }
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of rl) {
    const dir = line.trim();
    if (dir === '') continue;
    const [status, msg] = await serve(dir);
    answer(msg ? `${status} ${msg}` : `${status}`);
  }
  process.exit(0);
}
main();
