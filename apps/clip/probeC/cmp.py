import sys, json, struct, numpy as np
def load(p):
    b=open(p,'rb').read(); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); d={}
    for k,v in h.items():
        if k=='__metadata__': continue
        s,e=v['data_offsets']; dt={'F32':np.float32,'F64':np.float64,'I32':np.int32,'I64':np.int64,'U8':np.uint8,'BF16':np.uint16,'F16':np.float16}[v['dtype']]
        d[k]=np.frombuffer(b[8+n+s:8+n+e],dtype=dt).astype(np.float64)
    return d
a=load(sys.argv[1]); b=load(sys.argv[2])
assert a.keys()==b.keys(), (set(a)^set(b))
print('max abs diff', max(np.abs(a[k]-b[k]).max() if a[k].size else 0 for k in a))
