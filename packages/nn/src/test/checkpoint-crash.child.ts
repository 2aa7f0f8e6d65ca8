// Saves a checkpoint of checkpoint-crash.test.ts's model for one step, as a separate process the
// test can kill mid-save (DDP_CHECKPOINT_CRASH_AT names the point, see checkpoint-dir.ts).
//   node checkpoint-crash.child.ts <dir> <step>
import { saveCheckpoint } from '../checkpoint.js';
import { modelAtStep } from './checkpoint-crash-model.js';

const [dir, step] = process.argv.slice(2) as [string, string];
const model = modelAtStep(Number(step));
await saveCheckpoint(dir, { model, step: Number(step) });
console.log('saved');
