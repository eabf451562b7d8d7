// Promise.withResolvers arrived in Node 22. aws-local-stepfunctions 3 calls it
// in every Task state, and Node 20 is still what many machines run, so define
// it when it is missing. server.mjs imports this file first; it can also be
// preloaded with `node --require ./polyfill.cjs`.
'use strict';

if (typeof Promise.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers() {
      let resolve;
      let reject;
      const promise = new this((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}
