package caught;

import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.Table;

/** GenerationType.IDENTITY on a next_id column: wrong with EclipseLink's PostgreSQLPlatform,
 *  which reads the key with SELECT lastval() (the tests show it). */
@Entity
@Table(name = "el_identity_item")
public class IdentityItem {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    private Long id;

    private String body;

    protected IdentityItem() {}

    public IdentityItem(String body) { this.body = body; }

    public Long getId() { return id; }

    public String getBody() { return body; }
}
