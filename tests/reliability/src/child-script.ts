/** A rank script of this suite (children/<name>), for @ddp/launch/testing's runWorld. */
export const childScript = (name: string): URL => new URL(`./children/${name}`, import.meta.url);
