export { EarlyTerminationError, JoinArgumentError } from './errors.js';
export {
  isJoinActive,
  type JoinHook,
  type JoinHookOptions,
  type Joinable,
  type JoinOptions,
  join,
  notifyJoinContext,
} from './join.js';
