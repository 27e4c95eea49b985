package slurmconf
import ("testing";"fmt";"os")
func TestZ(t *testing.T){ c,err:=Load(os.Getenv("F")); if err!=nil {t.Fatal(err)}; fmt.Println(c.Hash, c.ClusterName, c.SlurmdPort, c.SlurmctldHost, len(c.Nodes()), *c.Nodes()[0], c.Warnings)}
