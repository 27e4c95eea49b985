package slurmconf
import ("testing";"strings";"time")
func TestZZ(t *testing.T){
 for _, s := range []string{head+"NodeName=n[0-65535],m[0-65535],o[0-65535],p[0-65535]\n", head+"NodeName=a[0-65535]b[0-65535]\n", head+strings.Repeat("NodeName=x Port=1\n", 1)} {
  st:=time.Now(); c, err := Parse(strings.NewReader(s), "x"); t.Log(time.Since(st), err); if c!=nil { st=time.Now(); _ = render(c); t.Log("render", time.Since(st)) }
 }
}
