export { EarlyTerminationError, JoinArgumentError, JoinShadowError } from './errors.js';
export {
  currentJoinNotice,
  isJoinActive,
  type Joinable,
  type JoinHook,
  type JoinHookOptions,
  type JoinOptions,
  join,
  notifyJoinContext,
} from './join.js';
