'use strict';
// The stand-in's clock: wall time plus an offset that the control API can move forward, so that
// tests can pass the minute and hour windows of the rate limits without waiting for them.

let offsetMs = 0;

function now() {
  return Date.now() + offsetMs;
}

function advance(seconds) {
  offsetMs += Math.round(seconds * 1000);
  return offsetMs;
}

function offset() {
  return offsetMs;
}

function reset() {
  offsetMs = 0;
}

module.exports = { now, advance, offset, reset };
