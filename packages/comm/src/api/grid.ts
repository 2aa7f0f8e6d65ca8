import { InvalidArgumentError } from '../errors.js';
import type { ProcessGroup } from './group.js';
import { newSubgroupsByEnumeration } from './subgroups.js';
import { getDefaultGroup } from './world.js';

/** Sizes of the dp × pp × tp grid; their product must be the world size (dp defaults to what is left). */
export interface GridSizes {
  dp?: number;
  pp?: number;
  tp?: number;
  timeoutMs?: number;
}

/**
 * Places the world's ranks on a dp × pp × tp grid, tp fastest (picotron's layout):
 * global rank = dpRank·(pp·tp) + ppRank·tp + tpRank, so the ranks of one tensor-parallel
 * group are adjacent (on one host when hosts hold consecutive ranks: tp talks the most).
 *
 * `create` is collective: every rank creates every tp, pp and dp group, in that order, so
 * group ids agree everywhere. Groups of one rank are created too, so code can always
 * call collectives on `tpGroup` etc. without special cases.
 */
export class ProcessGroupManager {
  private constructor(
    readonly globalRank: number,
    readonly dpSize: number,
    readonly ppSize: number,
    readonly tpSize: number,
    readonly dpGroup: ProcessGroup,
    readonly ppGroup: ProcessGroup,
    readonly tpGroup: ProcessGroup,
  ) {}

  static async create(sizes: GridSizes = {}): Promise<ProcessGroupManager> {
    const world = getDefaultGroup();
    const pp = sizes.pp ?? 1;
    const tp = sizes.tp ?? 1;
    const dp = sizes.dp ?? world.size / (pp * tp);
    for (const [name, v] of Object.entries({ dp, pp, tp })) {
      if (!Number.isInteger(v) || v < 1) {
        throw new InvalidArgumentError(
          `ProcessGroupManager: ${name} = ${v} must be a positive integer (world size ${world.size}, ` +
            `pp ${pp}, tp ${tp})`,
          { op: 'ProcessGroupManager.create', rank: world.rank },
        );
      }
    }
    if (dp * pp * tp !== world.size) {
      throw new InvalidArgumentError(
        `ProcessGroupManager: dp ${dp} × pp ${pp} × tp ${tp} = ${dp * pp * tp} is not the world size ${world.size}`,
        { op: 'ProcessGroupManager.create', rank: world.rank },
      );
    }
    const lists = gridGroupLists(dp, pp, tp);
    const opts = { timeoutMs: sizes.timeoutMs };
    const [tpGroup] = await newSubgroupsByEnumeration(lists.tp, opts);
    const [ppGroup] = await newSubgroupsByEnumeration(lists.pp, opts);
    const [dpGroup] = await newSubgroupsByEnumeration(lists.dp, opts);
    const me = world.ranks[world.rank];
    if (!tpGroup || !ppGroup || !dpGroup)
      throw new InvalidArgumentError(`ProcessGroupManager: rank ${me} is in no group`, {
        op: 'ProcessGroupManager.create',
        rank: me,
      });
    return new ProcessGroupManager(me, dp, pp, tp, dpGroup, ppGroup, tpGroup);
  }

  get worldSize(): number {
    return this.dpSize * this.ppSize * this.tpSize;
  }
  get tpRank(): number {
    return this.tpGroup.rank;
  }
  get ppRank(): number {
    return this.ppGroup.rank;
  }
  get dpRank(): number {
    return this.dpGroup.rank;
  }
  get isFirstStage(): boolean {
    return this.ppRank === 0;
  }
  get isLastStage(): boolean {
    return this.ppRank === this.ppSize - 1;
  }
  /** Global rank of the previous pipeline stage (same dp and tp coordinates), or null on the first stage. */
  get ppPrevRank(): number | null {
    return this.isFirstStage ? null : this.ppGroup.ranks[this.ppRank - 1];
  }
  /** Global rank of the next pipeline stage, or null on the last stage. */
  get ppNextRank(): number | null {
    return this.isLastStage ? null : this.ppGroup.ranks[this.ppRank + 1];
  }
  /** Global rank at the given grid coordinates. */
  rankAt(dpRank: number, ppRank: number, tpRank: number): number {
    return gridRank(this.ppSize, this.tpSize, dpRank, ppRank, tpRank);
  }
}

function gridRank(pp: number, tp: number, d: number, p: number, t: number): number {
  return d * pp * tp + p * tp + t;
}

/** The rank lists of every tp, pp and dp group of a dp × pp × tp grid (tp fastest). */
export function gridGroupLists(dp: number, pp: number, tp: number): { tp: number[][]; pp: number[][]; dp: number[][] } {
  const range = (n: number) => [...Array(n).keys()];
  return {
    tp: range(dp).flatMap((d) => range(pp).map((p) => range(tp).map((t) => gridRank(pp, tp, d, p, t)))),
    pp: range(dp).flatMap((d) => range(tp).map((t) => range(pp).map((p) => gridRank(pp, tp, d, p, t)))),
    dp: range(pp).flatMap((p) => range(tp).map((t) => range(dp).map((d) => gridRank(pp, tp, d, p, t)))),
  };
}
