'use strict';
// A lock for the stand-ins' asynchronous work: what runs under it runs one at a time, in order.

class Mutex {
  constructor() {
    this.tail = Promise.resolve();
  }

  // Runs `fn` once everything queued before it has settled; resolves or rejects as `fn` does.
  run(fn) {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => {});
    return result;
  }
}

module.exports = { Mutex };
