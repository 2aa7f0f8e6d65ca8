// A rank that starts the wasm backend and then fails the way user code does: an uncaught
// throw, or (with the argument 'rejection') an unhandled rejection.
import { setBackend } from '../index.js';

await setBackend('wasm');
if (process.argv[2] === 'rejection') void Promise.reject(new Error('user rejection in rank'));
else throw new Error('user error in rank');
