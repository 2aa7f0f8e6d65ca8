// What torch's DDP offers as a Module — train, eval, parameters, stateDict … — passed on to the module it
// wraps: a torch script calls them on the wrapper (`ddp.eval()`, `new SGD(ddp.parameters())`,
// `ddp.stateDict()`), which in plain JavaScript failed with "… is not a function" (probe AL). The state
// dict's keys are the module's own (torch prefixes them with `module.`), so one loads into either.
import type { Module } from '@ddp/nn';

export abstract class ModuleDelegates<M extends Module> {
  abstract readonly module: M;

  get training(): boolean {
    return this.module.training;
  }

  train(mode = true): this {
    this.module.train(mode);
    return this;
  }

  eval(): this {
    this.module.eval();
    return this;
  }

  parameters(...args: Parameters<Module['parameters']>): ReturnType<Module['parameters']> {
    return this.module.parameters(...args);
  }

  namedParameters(...args: Parameters<Module['namedParameters']>): ReturnType<Module['namedParameters']> {
    return this.module.namedParameters(...args);
  }

  buffers(...args: Parameters<Module['buffers']>): ReturnType<Module['buffers']> {
    return this.module.buffers(...args);
  }

  zeroGrad(...args: Parameters<Module['zeroGrad']>): void {
    this.module.zeroGrad(...args);
  }

  stateDict(): ReturnType<Module['stateDict']> {
    return this.module.stateDict();
  }

  loadStateDict(...args: Parameters<Module['loadStateDict']>): ReturnType<Module['loadStateDict']> {
    return this.module.loadStateDict(...args);
  }
}
