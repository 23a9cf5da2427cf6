package example;

import javax.persistence.Entity;
import javax.persistence.Id;
import javax.persistence.Table;
import org.eclipse.persistence.annotations.ReturnInsert;

/** The key is the column's DEFAULT next_id(...): EclipseLink leaves it out of the INSERT and
 *  reads it back with INSERT ... RETURNING id (one statement per entity). */
@Entity
@Table(name = "el_item")
public class Item {
    @Id
    @ReturnInsert(returnOnly = true)
    private Long id;

    private String body;

    protected Item() {}

    public Item(String body) { this.body = body; }

    public Long getId() { return id; }

    public String getBody() { return body; }
}
