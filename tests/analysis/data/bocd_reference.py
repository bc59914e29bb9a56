#!/usr/bin/env python3
"""The issue's BOCD test vector, computed with the algorithm of the widely used Python reference
(hildensia/bayesian_changepoint_detection: online_changepoint_detection with a StudentT observation model and
a constant hazard), transcribed without numpy/scipy. tests/analysis/bocd_test.cpp checks Bocd against the
full-precision values it prints (last line)."""
import math
def tpdf(x, df, loc, scale):
    z=(x-loc)/scale
    return math.exp(math.lgamma((df+1)/2)-math.lgamma(df/2))/(math.sqrt(df*math.pi)*scale)*(1+z*z/df)**(-(df+1)/2)
data=[1.0,1.1,0.9,1.0,1.05,0.95,5.0,5.1,4.9,5.0,5.05,4.95]
H=1/250.
a0,b0,k0,m0=0.1,0.01,1.0,0.0
n=len(data)
R=[[0.0]*(n+1) for _ in range(n+1)]
R[0][0]=1
al=[a0];be=[b0];ka=[k0];mu=[m0]
for t,x in enumerate(data):
    pp=[tpdf(x,2*al[i],mu[i],math.sqrt(be[i]*(ka[i]+1)/(al[i]*ka[i]))) for i in range(t+1)]
    for r in range(t+1):
        R[r+1][t+1]=R[r][t]*pp[r]*(1-H)
    R[0][t+1]=sum(R[r][t]*pp[r]*H for r in range(t+1))
    s=sum(R[r][t+1] for r in range(t+2))
    for r in range(t+2): R[r][t+1]/=s
    nmu=[m0]+[(ka[i]*mu[i]+x)/(ka[i]+1) for i in range(t+1)]
    nbe=[b0]+[be[i]+ka[i]*(x-mu[i])**2/(2*(ka[i]+1)) for i in range(t+1)]
    nka=[k0]+[k+1 for k in ka]
    nal=[a0]+[a+0.5 for a in al]
    mu,be,ka,al=nmu,nbe,nka,nal
print([round(R[0][t],6) for t in range(n+1)])
print([max(range(n+1),key=lambda r:R[r][t]) for t in range(n)])
print([round(R[w][w+6],4) for w in range(1,6)])
print([R[w][w+6] for w in range(1,6)])
