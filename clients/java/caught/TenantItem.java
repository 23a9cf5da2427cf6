package caught;

import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.Table;

/** IDENTITY on a next_id column that is not the table's first column. */
@Entity
@Table(name = "el_tenant_item")
public class TenantItem {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    private Long id;

    private Long tenant = 42L;

    private String body;

    protected TenantItem() {}

    public TenantItem(String body) { this.body = body; }

    public Long getId() { return id; }
}
